//! The chart installed for real on the local cluster's node: the image `make image` loaded
//! into the node's containerd (`make test` builds it before the tests), `helm install`, the
//! broker's Pod Ready through its probes under the chart's ServiceAccount and RBAC (in-cluster
//! configuration), a pool and claims served from the examples with no 403 in its log, a
//! `helm upgrade` that rolls the Pod without losing or double-binding a claim, a deleted Pod
//! replaced by one that takes over, and `helm uninstall`, which leaves the CRDs and the
//! user's objects. The chart's admission webhook refuses a claim the provider's validation
//! refuses, before and after the upgrade (which keeps its certificate); the API server reaches
//! it at the Pod's address (the local cluster's `--enable-aggregator-routing`: no kube-proxy).
//!
//! The release uses an operator domain of its own, so its CRDs come from the chart (templated
//! from the domain) and nothing of the other tests' is touched.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client, ResourceExt};
use support::tools::{cluster_dir, repo_dir, run, run_ok};
use support::{eventually, random_suffix};

const WAIT: Duration = Duration::from_secs(120);
const HELM_TIMEOUT: Duration = Duration::from_secs(240);

fn image() -> String {
    format!("localhost/poolboy:v{}", env!("CARGO_PKG_VERSION"))
}

/// What the test installed; removed when dropped, also after a failure: the release, the
/// finalizers of its kinds (no broker is left to remove them), its CRDs, its namespaces.
struct Installation {
    release: String,
    release_namespace: String,
    domain: String,
    namespaces: Vec<String>,
}

impl Drop for Installation {
    fn drop(&mut self) {
        let t = Duration::from_secs(120);
        let ns = self.release_namespace.as_str();
        run(
            "helm",
            &["uninstall", &self.release, "-n", ns, "--wait"],
            None,
            t,
        );
        for plural in [
            "resourceclaims",
            "resourcehandles",
            "resourcepools",
            "resourceproviders",
        ] {
            let kind = format!("{plural}.{}", self.domain);
            let listed = run(
                "kubectl",
                &[
                    "get",
                    &kind,
                    "-A",
                    "-o",
                    "jsonpath={range .items[*]}{.metadata.namespace} {.metadata.name}{\"\\n\"}{end}",
                ],
                None,
                t,
            );
            if !listed.success {
                continue;
            }
            for line in listed.stdout.lines() {
                if let Some((namespace, name)) = line.split_once(' ') {
                    let patch = r#"{"metadata":{"finalizers":null}}"#;
                    let args = [
                        "patch",
                        &kind,
                        name,
                        "-n",
                        namespace,
                        "--type=merge",
                        "-p",
                        patch,
                    ];
                    run("kubectl", &args, None, t);
                }
            }
        }
        for plural in [
            "resourceclaims",
            "resourcehandles",
            "resourcepools",
            "resourcepoolscalings",
            "resourceproviders",
            "resourcewatches",
        ] {
            let crd = format!("crd/{plural}.{}", self.domain);
            run(
                "kubectl",
                &["delete", &crd, "--ignore-not-found", "--wait=false"],
                None,
                t,
            );
        }
        for namespace in &self.namespaces {
            let args = [
                "delete",
                "namespace",
                namespace,
                "--ignore-not-found",
                "--wait=false",
            ];
            run("kubectl", &args, None, t);
        }
    }
}

/// One of the release's kinds, by plural.
fn resource(domain: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: domain.to_owned(),
        version: "v1".to_owned(),
        api_version: format!("{domain}/v1"),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    }
}

/// An example file with the test's domain, namespaces and claim name.
fn example(file: &str, domain: &str, namespaces: &Namespaces, claim: &str) -> String {
    let text = std::fs::read_to_string(repo_dir().join("examples").join(file))
        .unwrap_or_else(|e| panic!("reading examples/{file}: {e}"));
    text.replace("poolboy.gpte.redhat.com", domain)
        .replace(
            "namespace: poolboy-managed",
            &format!("namespace: {}", namespaces.managed),
        )
        .replace(
            "namespace: poolboy\n",
            &format!("namespace: {}\n", namespaces.operator),
        )
        .replace(
            "namespace: user1",
            &format!("namespace: {}", namespaces.user),
        )
        .replace("name: my-config\n", &format!("name: {claim}\n"))
}

struct Namespaces {
    operator: String,
    managed: String,
    user: String,
}

fn apply(yaml: &str) {
    run_ok("kubectl", &["apply", "-f", "-"], Some(yaml), WAIT);
}

/// Through the installed chart's admission webhook: a claim the example provider's check
/// refuses (ten `data` entries) is refused by `kubectl apply` with the message its status would
/// get, and not stored.
async fn assert_refused_at_admission(claims: &Api<DynamicObject>, domain: &str, ns: &Namespaces) {
    let entries: String = (0..10)
        .map(|i| format!("        key{i}: value\n"))
        .collect();
    let yaml = example("claim-configmap.yaml", domain, ns, "too-big")
        .replace("        color: blue\n", &entries);
    let refusal = "denied the request: spec.resources[0]: Validation check failed: data is small";
    // Until the Pod's address is in the Service's EndpointSlice, the webhook fails open: a
    // server-side dry run tells when it answers.
    eventually(
        "the webhook to refuse a claim with ten entries",
        WAIT,
        || async {
            let args = ["apply", "--dry-run=server", "-f", "-"];
            let tried = run("kubectl", &args, Some(&yaml), WAIT);
            (!tried.success && tried.stderr.contains(refusal)).then_some(())
        },
    )
    .await;
    let applied = run("kubectl", &["apply", "-f", "-"], Some(&yaml), WAIT);
    assert!(
        !applied.success && applied.stderr.contains(refusal),
        "{applied:?}"
    );
    assert!(
        claims
            .get_opt("too-big")
            .await
            .expect("reading a claim")
            .is_none(),
        "a refused claim is not stored"
    );
}

/// The release's Pods (not being deleted), by name.
async fn pods(client: &Client, namespace: &str, release: &str) -> Vec<Pod> {
    let selector = format!("app.kubernetes.io/instance={release}");
    Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("listing the broker's Pods")
        .items
        .into_iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .collect()
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// Seconds from the Pod's creation to its Ready condition (the API's second resolution).
fn start_to_ready(pod: &Pod) -> i64 {
    let created = pod.metadata.creation_timestamp.as_ref().expect("created").0;
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time.as_ref())
        .expect("a Ready condition")
        .0;
    ready.as_second() - created.as_second()
}

/// Waits for exactly one Ready Pod of the release other than `not`, and returns it.
async fn the_ready_pod(client: &Client, namespace: &str, release: &str, not: &[String]) -> Pod {
    eventually(
        &format!("one Ready broker Pod in {namespace} other than {not:?}"),
        WAIT,
        || async {
            let pods = pods(client, namespace, release).await;
            match pods.as_slice() {
                [pod] if is_ready(pod) && !not.contains(&pod.name_any()) => Some(pod.clone()),
                _ => None,
            }
        },
    )
    .await
}

/// The broker's log, asserted free of authorization failures (kube reports a 403 as
/// `... is forbidden: User ... (Forbidden)`).
fn assert_no_forbidden(namespace: &str, pod: &str) -> String {
    let log = run_ok("kubectl", &["logs", pod, "-n", namespace], None, WAIT);
    for line in log.lines() {
        assert!(
            !line.to_lowercase().contains("forbidden"),
            "the broker was refused by RBAC (the chart's rules are not enough):\n{line}"
        );
    }
    log
}

/// The Events of object `name` in `namespace`, one a line (they say why a claim's handle was
/// made for it rather than taken from a pool).
fn events_of(namespace: &str, name: &str) -> String {
    let selector = format!("involvedObject.name={name}");
    let args = [
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        &selector,
    ];
    let listed = run("kubectl", &args, None, WAIT);
    format!("{}{}", listed.stdout, listed.stderr)
}

/// Waits until claim `name` is bound, and returns its handle's name.
async fn bound(claims: &Api<DynamicObject>, name: &str) -> String {
    eventually(&format!("claim {name} bound"), WAIT, || async {
        let claim = claims.get_opt(name).await.expect("reading a claim")?;
        claim.data["status"]["resourceHandle"]["name"]
            .as_str()
            .map(str::to_owned)
    })
    .await
}

/// Every bound handle names one claim, and every claim in `expected` is bound to exactly the
/// handle given there (no claim lost, none bound twice).
async fn assert_bindings(handles: &Api<DynamicObject>, expected: &BTreeMap<String, String>) {
    let mut by_claim: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for handle in handles
        .list(&ListParams::default())
        .await
        .expect("handles")
        .items
    {
        if handle.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(claim) = handle.data["spec"]["resourceClaim"]["name"].as_str() {
            by_claim
                .entry(claim.to_owned())
                .or_default()
                .push(handle.name_any());
        }
    }
    for (claim, handle) in expected {
        assert_eq!(
            by_claim.get(claim),
            Some(&vec![handle.clone()]),
            "claim {claim} must be bound to exactly handle {handle}; bindings: {by_claim:?}"
        );
    }
    assert_eq!(
        by_claim.len(),
        expected.len(),
        "handles bound to unknown claims: {by_claim:?}"
    );
}

#[tokio::test]
async fn the_chart_runs_the_broker_in_a_pod_through_upgrade_restart_and_uninstall() {
    let socket = cluster_dir().join("node/containerd.sock");
    let socket = socket.to_str().expect("a UTF-8 path");
    let images = run(
        "ctr",
        &["--address", socket, "-n", "k8s.io", "images", "ls", "-q"],
        None,
        WAIT,
    );
    assert!(
        images.success && images.stdout.lines().any(|line| line == image()),
        "{} is not in the node's containerd ({socket}): run `make image` (make test does) \
         with the cluster up\n{}{}",
        image(),
        images.stdout,
        images.stderr
    );

    let env = support::TestEnv::new().await;
    let suffix = random_suffix();
    let release = format!("e2e-{suffix}");
    let domain = format!("{suffix}.e2e.poolboy.test");
    let ns = Namespaces {
        operator: format!("e2e-broker-{suffix}"),
        managed: format!("e2e-managed-{suffix}"),
        user: env.namespace.clone(),
    };
    run_ok("kubectl", &["create", "namespace", &ns.managed], None, WAIT);
    let _installation = Installation {
        release: release.clone(),
        release_namespace: env.namespace.clone(),
        domain: domain.clone(),
        namespaces: vec![ns.operator.clone(), ns.managed.clone()],
    };

    // helm install: the CRDs for the domain, the RBAC, the broker.
    let (repository, tag) = image()
        .rsplit_once(':')
        .map(|(r, t)| (r.to_owned(), t.to_owned()))
        .expect("a tag");
    let chart = repo_dir().join("helm");
    let chart = chart.to_str().expect("a UTF-8 path");
    let sets = [
        format!("fullnameOverride={release}"),
        format!("namespace.name={}", ns.operator),
        format!("operatorDomain.name={domain}"),
        format!("image.repository={repository}"),
        format!("image.tagOverride={tag}"),
        "image.pullPolicy=Never".to_owned(),
        "managedResources[0].apiGroups[0]=".to_owned(),
        "managedResources[0].resources[0]=configmaps".to_owned(),
        format!("managedResources[0].namespaces[0]={}", ns.managed),
    ];
    let mut args = vec![
        "install",
        &release,
        chart,
        "-n",
        &env.namespace,
        "--wait",
        "--timeout",
        "180s",
    ];
    for set in &sets {
        args.extend(["--set", set]);
    }
    let started = Instant::now();
    run_ok("helm", &args, None, HELM_TIMEOUT);
    let installed_in = started.elapsed();
    let client = env.client.clone();
    let first = the_ready_pod(&client, &ns.operator, &release, &[]).await;
    eprintln!(
        "helm install --wait: {:.1} s; Pod {} created to Ready: {} s",
        installed_in.as_secs_f64(),
        first.name_any(),
        start_to_ready(&first)
    );
    let account = first
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone());
    assert_eq!(
        account.as_deref(),
        Some(release.as_str()),
        "the chart's ServiceAccount"
    );

    // The examples, served by the deployed broker: a pool of two and a claim bound from it.
    let claims = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns.user,
        &resource(&domain, "ResourceClaim", "resourceclaims"),
    );
    let handles = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns.operator,
        &resource(&domain, "ResourceHandle", "resourcehandles"),
    );
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), &ns.managed);
    apply(&example(
        "provider-configmap.yaml",
        &domain,
        &ns,
        "my-config",
    ));
    apply(&example("pool-configmap.yaml", &domain, &ns, "my-config"));
    // A claim created before the broker has seen the pool's handles gets a handle of its own:
    // ready ones are seen (the broker wrote their status).
    eventually("the pool's two unbound handles, ready", WAIT, || async {
        let listed = handles.list(&ListParams::default()).await.expect("handles");
        let spare = listed
            .items
            .iter()
            .filter(|h| {
                h.data["spec"]["resourcePool"]["name"] == "configmaps"
                    && h.data["spec"]["resourceClaim"].is_null()
                    && h.data["status"]["ready"] == true
            })
            .count();
        (spare >= 2).then_some(())
    })
    .await;
    apply(&example("claim-configmap.yaml", &domain, &ns, "claim-1"));
    let mut expected = BTreeMap::new();
    let handle_1 = bound(&claims, "claim-1").await;
    let pooled = handles.get(&handle_1).await.expect("the bound handle");
    assert!(
        pooled.data["spec"]["resourcePool"]["name"] == "configmaps",
        "claim-1 binds a handle of the pool: {:?}\nits Events: {}",
        pooled.data["spec"],
        events_of(&ns.user, "claim-1")
    );
    expected.insert("claim-1".to_owned(), handle_1.clone());
    assert_refused_at_admission(&claims, &domain, &ns).await;
    eventually(
        "the pool's ConfigMaps (2 spare and the bound one)",
        WAIT,
        || async {
            let listed = configmaps
                .list(&ListParams::default())
                .await
                .expect("configmaps");
            let owned = listed
                .items
                .iter()
                .filter(|c| c.name_any().starts_with("guid"))
                .count();
            (owned >= 3).then_some(())
        },
    )
    .await;
    assert_bindings(&handles, &expected).await;
    assert_no_forbidden(&ns.operator, &first.name_any());

    // helm upgrade to new values: the Pod rolls; nothing is lost or bound twice.
    let args = vec![
        "upgrade",
        &release,
        chart,
        "-n",
        &env.namespace,
        "--reuse-values",
        "--set",
        "logLevel=debug",
        "--set-string",
        "podAnnotations.e2e/revision=2",
        "--wait",
        "--timeout",
        "180s",
    ];
    let started = Instant::now();
    run_ok("helm", &args, None, HELM_TIMEOUT);
    let second = the_ready_pod(&client, &ns.operator, &release, &[first.name_any()]).await;
    eprintln!(
        "helm upgrade --wait: {:.1} s; Pod {} created to Ready: {} s",
        started.elapsed().as_secs_f64(),
        second.name_any(),
        start_to_ready(&second)
    );
    let annotations = second.annotations();
    assert_eq!(
        annotations.get("e2e/revision").map(String::as_str),
        Some("2")
    );
    assert_refused_at_admission(&claims, &domain, &ns).await;
    apply(&example("claim-configmap.yaml", &domain, &ns, "claim-2"));
    expected.insert("claim-2".to_owned(), bound(&claims, "claim-2").await);
    assert_bindings(&handles, &expected).await;
    let log = assert_no_forbidden(&ns.operator, &second.name_any());
    assert!(log.contains("DEBUG"), "logLevel=debug reached the new Pod");

    // Delete the Pod: it stops on SIGTERM well within its grace period, and a new one takes
    // over.
    let pods_api = Api::<Pod>::namespaced(client.clone(), &ns.operator);
    let deleting = Instant::now();
    pods_api
        .delete(&second.name_any(), &Default::default())
        .await
        .expect("deleting the broker's Pod");
    let third = the_ready_pod(
        &client,
        &ns.operator,
        &release,
        &[first.name_any(), second.name_any()],
    )
    .await;
    eprintln!(
        "Pod deleted to a new Pod Ready: {:.1} s; {} created to Ready: {} s",
        deleting.elapsed().as_secs_f64(),
        third.name_any(),
        start_to_ready(&third)
    );
    support::gone(&pods_api, &second.name_any(), Duration::from_secs(25)).await;
    apply(&example("claim-configmap.yaml", &domain, &ns, "claim-3"));
    expected.insert("claim-3".to_owned(), bound(&claims, "claim-3").await);
    assert_bindings(&handles, &expected).await;
    assert_no_forbidden(&ns.operator, &third.name_any());

    // A deleted claim is cleaned up by the deployed broker: its handle and ConfigMap go.
    claims
        .delete("claim-3", &Default::default())
        .await
        .expect("deleting claim-3");
    let handle_3 = expected.remove("claim-3").expect("claim-3 was bound");
    support::gone(&claims, "claim-3", WAIT).await;
    support::gone(&handles, &handle_3, WAIT).await;
    assert_bindings(&handles, &expected).await;

    // helm uninstall: the broker goes; the CRDs and the user's objects stay.
    run_ok(
        "helm",
        &[
            "uninstall",
            &release,
            "-n",
            &env.namespace,
            "--wait",
            "--timeout",
            "120s",
        ],
        None,
        HELM_TIMEOUT,
    );
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns.operator);
    support::gone(&deployments, &release, WAIT).await;
    eventually("the broker's Pods are gone", WAIT, || async {
        pods(&client, &ns.operator, &release)
            .await
            .is_empty()
            .then_some(())
    })
    .await;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for plural in [
        "resourceclaims",
        "resourcehandles",
        "resourcepools",
        "resourceproviders",
    ] {
        let name = format!("{plural}.{domain}");
        assert!(
            crds.get_opt(&name).await.expect("reading a CRD").is_some(),
            "CRD {name} stays after helm uninstall"
        );
    }
    for claim in expected.keys() {
        assert!(
            claims.get_opt(claim).await.expect("claim").is_some(),
            "{claim} stays"
        );
    }
    let pools = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns.operator,
        &resource(&domain, "ResourcePool", "resourcepools"),
    );
    let pool = pools.get_opt("configmaps").await.expect("reading the pool");
    assert!(
        pool.is_some_and(|p| p.metadata.deletion_timestamp.is_none()),
        "the pool and its namespace stay after helm uninstall"
    );
    assert_bindings(&handles, &expected).await;

    drop(_installation);
    env.cleanup().await;
}

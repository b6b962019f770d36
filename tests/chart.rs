//! The Helm chart's RBAC, applied to the local cluster and checked with `kubectl auth can-i
//! --as`: the operator gets exactly the verbs the controllers use (operator-namespace kinds
//! through a Role), managed kinds as listed in `managedResources`, and Anarchy's runners
//! (`anarchy-runner-<runner>` in every Anarchy namespace) exactly what their governors do to
//! handles and claims. Also: the chart's CRDs follow the operator domain, and the admission
//! webhook's configuration, Secret, Service and Deployment agree (and its certificate is kept on
//! upgrade).

mod support;

use std::time::Duration;

use support::random_suffix;
use support::tools::{can_i, can_i_status, helm_template, repo_dir, run_ok};

const GROUP: &str = "poolboy.gpte.redhat.com";
const TIMEOUT: Duration = Duration::from_secs(60);

/// Applies rendered YAML; deletes it (and the extra namespaces) when dropped, also on a panic.
struct Applied {
    yaml: String,
    namespaces: Vec<String>,
}

impl Applied {
    fn new(yaml: String, namespaces: Vec<String>) -> Applied {
        for namespace in &namespaces {
            run_ok(
                "kubectl",
                &["create", "namespace", namespace],
                None,
                TIMEOUT,
            );
        }
        let applied = Applied { yaml, namespaces };
        run_ok(
            "kubectl",
            &["apply", "-f", "-"],
            Some(&applied.yaml),
            TIMEOUT,
        );
        applied
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        let args = ["delete", "--ignore-not-found", "--wait=false", "-f", "-"];
        support::tools::run("kubectl", &args, Some(&self.yaml), TIMEOUT);
        for namespace in &self.namespaces {
            let args = ["delete", "namespace", namespace, "--wait=false"];
            support::tools::run("kubectl", &args, None, TIMEOUT);
        }
    }
}

fn sa(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// Asserts that `user` may do exactly `allowed` of `verbs` on `what` in `namespace`.
fn assert_exactly(
    user: &str,
    what: &str,
    namespace: Option<&str>,
    verbs: &[&str],
    allowed: &[&str],
) {
    for verb in verbs {
        let expected = allowed.contains(verb);
        assert_eq!(
            can_i(user, verb, what, namespace),
            expected,
            "{user} {} {verb} {what} in {namespace:?}",
            if expected {
                "must be allowed to"
            } else {
                "must not"
            }
        );
    }
}

const ALL_VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

#[tokio::test]
async fn the_operator_and_anarchy_runners_get_exactly_the_verbs_they_use() {
    let env = support::TestEnv::new().await;
    let operator_ns = env.namespace.clone();
    let suffix = random_suffix();
    let release = format!("rbac-{suffix}");
    let (anarchy_a, anarchy_b) = (format!("anarchy-a-{suffix}"), format!("anarchy-b-{suffix}"));
    let managed_ns = format!("managed-{suffix}");
    let user_ns = format!("user-{suffix}"); // never created: RBAC does not need it
    let yaml = helm_template(
        &release,
        &[
            "rbac.yaml",
            "rbac-managed.yaml",
            "anarchy-integration.yaml",
            "serviceaccount.yaml",
        ],
        &[
            format!("fullnameOverride={release}"),
            format!("namespace.name={operator_ns}"),
            "namespace.create=false".into(),
            "managedResources[0].apiGroups[0]=".into(),
            "managedResources[0].resources[0]=configmaps".into(),
            format!("managedResources[0].namespaces[0]={managed_ns}"),
            "managedResources[1].apiGroups[0]=apps".into(),
            "managedResources[1].resources[0]=statefulsets".into(),
            "anarchy.create=true".into(),
            format!("anarchy.namespaces={{{anarchy_a},{anarchy_b}}}"),
            "anarchy.runners={default,extra}".into(),
        ],
    );
    // kubectl resolves the kinds it is asked about: AnarchySubject must be known.
    let crd = repo_dir().join("examples/anarchy-subject-crd.yaml");
    let crd = crd.to_str().expect("a UTF-8 path");
    let args = [
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=poolboy-tests",
    ];
    run_ok(
        "kubectl",
        &[&args[..], &["-f", crd]].concat(),
        None,
        TIMEOUT,
    );
    let established = "--for=condition=Established";
    let name = "crd/anarchysubjects.anarchy.gpte.redhat.com";
    run_ok(
        "kubectl",
        &["wait", established, name, "--timeout=60s"],
        None,
        TIMEOUT,
    );
    let _applied = Applied::new(
        yaml,
        vec![anarchy_a.clone(), anarchy_b.clone(), managed_ns.clone()],
    );
    let operator = sa(&operator_ns, &release);
    let kind = |plural: &str| format!("{plural}.{GROUP}");
    let (op, user) = (Some(operator_ns.as_str()), Some(user_ns.as_str()));

    // Claims live everywhere: cluster-wide, no create (tenants create them) and no update.
    let claims = kind("resourceclaims");
    let claim_verbs = ["delete", "get", "list", "patch", "watch"];
    assert_exactly(&operator, &claims, user, ALL_VERBS, &claim_verbs);
    assert!(can_i_status(&operator, "patch", &claims, user));
    assert!(!can_i_status(&operator, "update", &claims, user));
    // The kinds of the operator namespace: granted there only.
    let handles = kind("resourcehandles");
    let handle_verbs = ["create", "delete", "get", "list", "patch", "watch"];
    assert_exactly(&operator, &handles, op, ALL_VERBS, &handle_verbs);
    assert_exactly(&operator, &handles, user, ALL_VERBS, &[]);
    for plural in ["resourcepools", "resourcepoolscalings"] {
        let pools = kind(plural);
        assert_exactly(
            &operator,
            &pools,
            op,
            ALL_VERBS,
            &["get", "list", "patch", "watch"],
        );
        assert_exactly(&operator, &pools, user, ALL_VERBS, &[]);
    }
    assert_exactly(
        &operator,
        &kind("resourceproviders"),
        op,
        ALL_VERBS,
        &["list", "watch"],
    );
    assert_exactly(
        &operator,
        &kind("resourcewatches"),
        op,
        ALL_VERBS,
        &["create"],
    );
    for plural in [
        "resourcehandles",
        "resourcepools",
        "resourcepoolscalings",
        "resourceproviders",
    ] {
        assert!(
            can_i_status(&operator, "patch", &kind(plural), op),
            "{plural}/status"
        );
        assert!(
            !can_i_status(&operator, "update", &kind(plural), op),
            "{plural}/status"
        );
        assert!(
            !can_i_status(&operator, "patch", &kind(plural), user),
            "{plural}/status"
        );
    }
    // A claim's requester: the namespace, read by name only.
    assert_exactly(&operator, "namespaces", None, ALL_VERBS, &["get"]);
    // Events through events.k8s.io only.
    assert_exactly(
        &operator,
        "events.events.k8s.io",
        user,
        ALL_VERBS,
        &["create", "patch"],
    );
    assert_exactly(&operator, "events", user, ALL_VERBS, &[]);
    assert_exactly(&operator, "pods", op, ALL_VERBS, &[]);
    assert_exactly(&operator, "secrets", op, ALL_VERBS, &[]);
    // Managed kinds, from managedResources: where listed, with the handle controller's verbs.
    let managed_verbs = ["create", "delete", "get", "list", "patch", "watch"];
    let managed = Some(managed_ns.as_str());
    assert_exactly(&operator, "configmaps", managed, ALL_VERBS, &managed_verbs);
    assert_exactly(&operator, "configmaps", user, ALL_VERBS, &[]);
    // A managed kind without namespaces: cluster-wide.
    let cluster_wide = "statefulsets.apps";
    assert_exactly(&operator, cluster_wide, user, ALL_VERBS, &managed_verbs);
    assert_exactly(&operator, "deployments.apps", user, ALL_VERBS, &[]);
    // AnarchySubjects in each Anarchy namespace, nowhere else.
    let subjects = "anarchysubjects.anarchy.gpte.redhat.com";
    for anarchy in [&anarchy_a, &anarchy_b] {
        assert_exactly(
            &operator,
            subjects,
            Some(anarchy),
            ALL_VERBS,
            &managed_verbs,
        );
    }
    assert_exactly(&operator, subjects, user, ALL_VERBS, &[]);

    // Every runner of every Anarchy namespace: get, (JSON) patch and delete handles; get,
    // list and patch claims. Nothing else, and nobody else in those namespaces.
    for anarchy in [&anarchy_a, &anarchy_b] {
        for runner in ["default", "extra"] {
            let runner = sa(anarchy, &format!("anarchy-runner-{runner}"));
            assert_exactly(
                &runner,
                &handles,
                op,
                ALL_VERBS,
                &["delete", "get", "patch"],
            );
            assert_exactly(&runner, &handles, user, ALL_VERBS, &[]);
            assert_exactly(&runner, &claims, user, ALL_VERBS, &["get", "list", "patch"]);
            assert!(!can_i_status(&runner, "patch", &claims, user));
            assert_exactly(&runner, &kind("resourcepools"), op, &["get", "patch"], &[]);
            assert_exactly(&runner, subjects, Some(anarchy), &["get", "patch"], &[]);
        }
        for other in ["anarchy-operator", "anarchy-runner-other", "default"] {
            let other = sa(anarchy, other);
            assert_exactly(&other, &handles, op, &["get", "patch", "delete"], &[]);
            assert_exactly(&other, &claims, user, &["get", "patch"], &[]);
        }
    }
    // A runner of another namespace gets nothing.
    let stranger = sa(&user_ns, "anarchy-runner-default");
    assert_exactly(&stranger, &handles, op, &["get", "patch", "delete"], &[]);

    drop(_applied);
    env.cleanup().await;
}

#[tokio::test]
async fn a_namespaced_install_has_roles_only_and_confines_the_operator() {
    let env = support::TestEnv::new().await;
    let operator_ns = env.namespace.clone();
    let suffix = random_suffix();
    let release = format!("rbacns-{suffix}");
    let anarchy = format!("anarchy-{suffix}");
    let user_ns = format!("user-{suffix}");
    let sets = vec![
        format!("fullnameOverride={release}"),
        format!("namespace.name={operator_ns}"),
        "namespace.create=false".into(),
        "namespaced=true".into(),
        "managedResources[0].apiGroups[0]=".into(),
        "managedResources[0].resources[0]=configmaps".into(),
        "anarchy.create=true".into(),
        format!("anarchy.namespaces={{{anarchy}}}"),
    ];
    let mut no_crds = sets.clone();
    no_crds.push("crds.create=false".into());
    let everything = helm_template(&release, &[], &no_crds);
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        assert!(
            !everything.contains(&format!("\nkind: {kind}\n")),
            "namespaced: true renders a {kind}:\n{everything}"
        );
    }
    let yaml = helm_template(
        &release,
        &[
            "rbac.yaml",
            "rbac-managed.yaml",
            "anarchy-integration.yaml",
            "serviceaccount.yaml",
        ],
        &sets,
    );
    let _applied = Applied::new(yaml, vec![anarchy.clone()]);
    let operator = sa(&operator_ns, &release);
    let claims = format!("resourceclaims.{GROUP}");
    let (op, user) = (Some(operator_ns.as_str()), Some(user_ns.as_str()));
    let claim_verbs = ["delete", "get", "list", "patch", "watch"];
    assert_exactly(&operator, &claims, op, ALL_VERBS, &claim_verbs);
    assert_exactly(&operator, &claims, user, ALL_VERBS, &[]);
    assert!(can_i_status(&operator, "patch", &claims, op));
    // Its own namespace's annotations (the requester), through the Role.
    let own = format!("namespaces/{operator_ns}");
    assert!(can_i(&operator, "get", &own, op));
    assert!(!can_i(
        &operator,
        "get",
        &format!("namespaces/{user_ns}"),
        user
    ));
    assert_exactly(
        &operator,
        "events.events.k8s.io",
        op,
        ALL_VERBS,
        &["create", "patch"],
    );
    assert_exactly(&operator, "events.events.k8s.io", user, ALL_VERBS, &[]);
    // A managed kind without namespaces: the operator namespace.
    let managed_verbs = ["create", "delete", "get", "list", "patch", "watch"];
    assert_exactly(&operator, "configmaps", op, ALL_VERBS, &managed_verbs);
    assert_exactly(&operator, "configmaps", user, ALL_VERBS, &[]);
    // The runners: handles and claims in the operator namespace only.
    let runner = sa(&anarchy, "anarchy-runner-default");
    let handles = format!("resourcehandles.{GROUP}");
    assert_exactly(
        &runner,
        &handles,
        op,
        ALL_VERBS,
        &["delete", "get", "patch"],
    );
    assert_exactly(&runner, &claims, op, ALL_VERBS, &["get", "list", "patch"]);
    assert_exactly(&runner, &claims, user, ALL_VERBS, &[]);

    drop(_applied);
    env.cleanup().await;
}

#[test]
fn the_chart_crds_follow_the_operator_domain_and_stay_on_uninstall() {
    let yaml = helm_template(
        "crds",
        &[],
        &["operatorDomain.name=pools.example.org".to_owned()],
    );
    let crds: Vec<&str> = yaml
        .split("\n---")
        .filter(|doc| doc.contains("kind: CustomResourceDefinition"))
        .collect();
    assert_eq!(crds.len(), 6, "six CRDs:\n{yaml}");
    for crd in &crds {
        assert!(crd.contains("\n  group: pools.example.org\n"), "{crd}");
        assert!(crd.contains(".pools.example.org\n"), "{crd}");
        assert!(!crd.contains(GROUP), "{crd}");
        assert!(crd.contains("helm.sh/resource-policy: keep"), "{crd}");
    }
    // The operator watches the same group, and its RBAC names it.
    assert!(yaml.contains("value: pools.example.org"), "OPERATOR_DOMAIN");
    assert!(yaml.contains("apiGroups: [\"pools.example.org\"]"));
    assert!(!yaml.contains(&format!("apiGroups: [\"{GROUP}\"]")));

    let skipped = helm_template("crds", &[], &["crds.create=false".to_owned()]);
    assert!(!skipped.contains("kind: CustomResourceDefinition"));
}

/// The rendered documents of `yaml` of `kind`.
fn documents(yaml: &str, kind: &str) -> Vec<serde_json::Value> {
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(yaml).unwrap_or_else(|e| panic!("bad YAML ({e}):\n{yaml}"));
    documents
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .collect()
}

fn the_document(yaml: &str, kind: &str) -> serde_json::Value {
    let mut found = documents(yaml, kind);
    assert_eq!(found.len(), 1, "one {kind}:\n{yaml}");
    found.remove(0)
}

fn base64_decoded(value: &serde_json::Value) -> String {
    use base64::Engine;
    let text = value.as_str().expect("a base64 string");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("base64");
    String::from_utf8(bytes).expect("PEM is text")
}

/// `openssl` run on `pem` (written to a file of its own, as `-in`/`-CAfile` want them).
fn openssl(args: &[&str], files: &[(&str, &str)]) -> String {
    let dir = std::env::temp_dir().join(format!("poolboy-chart-{}", random_suffix()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    for (name, content) in files {
        std::fs::write(dir.join(name), content).expect("writing a PEM file");
    }
    let output = std::process::Command::new("openssl")
        .args(args)
        .current_dir(&dir)
        .output()
        .expect("running openssl (README: a requirement)");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        output.status.success(),
        "openssl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The webhook's pieces agree: the CA bundle the API server trusts is the CA that signed the
/// Secret's certificate, which names the Service the configuration calls; the Deployment mounts
/// that Secret and serves the port the Service targets; the broker's own writes are left out;
/// a namespaced install sends only its own namespace's claims.
#[test]
fn the_webhook_configuration_trusts_the_certificate_the_broker_serves() {
    let sets = [
        "fullnameOverride=pb".to_owned(),
        "namespace.name=brokers".to_owned(),
        "operatorDomain.name=pools.example.org".to_owned(),
    ];
    let yaml = helm_template("pb", &["webhook.yaml", "deployment.yaml"], &sets);
    let secret = the_document(&yaml, "Secret");
    let service = the_document(&yaml, "Service");
    let configuration = the_document(&yaml, "ValidatingWebhookConfiguration");
    let deployment = the_document(&yaml, "Deployment");

    let webhooks = configuration["webhooks"].as_array().expect("webhooks");
    assert_eq!(webhooks.len(), 1, "{configuration}");
    let webhook = &webhooks[0];
    assert_eq!(webhook["name"], "resourceclaims.pools.example.org");
    assert_eq!(webhook["failurePolicy"], "Ignore");
    assert_eq!(webhook["sideEffects"], "None");
    assert_eq!(
        webhook["rules"][0]["apiGroups"],
        serde_json::json!(["pools.example.org"])
    );
    assert_eq!(
        webhook["rules"][0]["operations"],
        serde_json::json!(["CREATE", "UPDATE"])
    );
    assert_eq!(
        webhook["rules"][0]["resources"],
        serde_json::json!(["resourceclaims"])
    );
    assert!(webhook.get("namespaceSelector").is_none(), "{webhook}");
    assert_eq!(
        webhook["matchConditions"][0]["expression"],
        "request.userInfo.username != 'system:serviceaccount:brokers:pb'"
    );

    // The Service the configuration calls, and the name its certificate must carry.
    let called = &webhook["clientConfig"]["service"];
    assert_eq!(called["name"], service["metadata"]["name"]);
    assert_eq!(called["namespace"], service["metadata"]["namespace"]);
    assert_eq!(called["path"], "/validate-resourceclaim");
    assert_eq!(called["port"], service["spec"]["ports"][0]["port"]);
    let host = format!(
        "{}.{}.svc",
        called["name"].as_str().expect("a name"),
        called["namespace"].as_str().expect("a namespace")
    );
    assert_eq!(host, "pb-webhook.brokers.svc");

    assert_eq!(secret["type"], "kubernetes.io/tls");
    let ca = base64_decoded(&secret["data"]["ca.crt"]);
    let cert = base64_decoded(&secret["data"]["tls.crt"]);
    assert_eq!(base64_decoded(&webhook["clientConfig"]["caBundle"]), ca);
    let verified = openssl(
        &[
            "verify",
            "-CAfile",
            "ca.pem",
            "-purpose",
            "sslserver",
            "tls.pem",
        ],
        &[("ca.pem", &ca), ("tls.pem", &cert)],
    );
    assert_eq!(verified.trim(), "tls.pem: OK");
    let names = openssl(
        &["x509", "-in", "tls.pem", "-noout", "-ext", "subjectAltName"],
        &[("tls.pem", &cert)],
    );
    assert!(names.contains(&format!("DNS:{host},")), "{names}");
    // The key is the certificate's.
    let key = base64_decoded(&secret["data"]["tls.key"]);
    let from_cert = openssl(
        &["x509", "-in", "tls.pem", "-noout", "-pubkey"],
        &[("tls.pem", &cert)],
    );
    let from_key = openssl(&["pkey", "-in", "key.pem", "-pubout"], &[("key.pem", &key)]);
    assert_eq!(from_cert, from_key);

    // The Pod serves the port the Service targets, with the Secret's certificate.
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let port = container["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|p| p["name"] == "webhook"))
        .expect("a webhook port");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "webhook");
    let env = |name: &str| {
        container["env"]
            .as_array()
            .and_then(|env| env.iter().find(|e| e["name"] == name))
            .map(|e| e["value"].clone())
            .unwrap_or_else(|| panic!("env {name}: {container}"))
    };
    assert_eq!(
        env("POOLBOY_WEBHOOK_ADDRESS"),
        format!("0.0.0.0:{}", port["containerPort"])
    );
    let mounted = container["volumeMounts"]
        .as_array()
        .and_then(|m| {
            m.iter()
                .find(|m| m["mountPath"] == env("POOLBOY_WEBHOOK_CERT_DIR"))
        })
        .expect("the certificate directory is mounted");
    let volume = pod["volumes"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == mounted["name"]))
        .expect("the mounted volume");
    assert_eq!(volume["secret"]["secretName"], secret["metadata"]["name"]);

    let namespaced = helm_template(
        "pb",
        &["webhook.yaml"],
        &[sets[1].clone(), "namespaced=true".into()],
    );
    let configuration = the_document(&namespaced, "ValidatingWebhookConfiguration");
    assert_eq!(
        configuration["webhooks"][0]["namespaceSelector"],
        serde_json::json!({"matchLabels": {"kubernetes.io/metadata.name": "brokers"}})
    );

    let off = helm_template("pb", &[], &["webhook.enabled=false".to_owned()]);
    for kind in ["ValidatingWebhookConfiguration", "Secret"] {
        assert!(
            documents(&off, kind).is_empty(),
            "webhook.enabled=false renders a {kind}"
        );
    }
    assert!(!off.contains("POOLBOY_WEBHOOK"), "{off}");
}

/// `helm upgrade` keeps the webhook's certificate (the chart looks its Secret up), so the CA
/// bundle never changes under a running broker.
#[tokio::test]
async fn the_webhook_certificate_is_made_once_and_kept_on_upgrade() {
    let env = support::TestEnv::new().await;
    let suffix = random_suffix();
    let release = format!("cert-{suffix}");
    let chart = repo_dir().join("helm");
    let chart = chart.to_str().expect("a UTF-8 path");
    let domain = format!("{suffix}.cert.poolboy.test");
    let sets = [
        format!("fullnameOverride={release}"),
        format!("namespace.name={}", env.namespace),
        "namespace.create=false".to_owned(),
        "crds.create=false".to_owned(),
        format!("operatorDomain.name={domain}"),
        // No Pod is needed (nor runs on a control plane alone): only the Secret matters.
        "replicaCount=0".to_owned(),
    ];
    let helm = |verb: &str| {
        let mut args = vec![verb, &release, chart, "-n", &env.namespace];
        for set in &sets {
            args.extend(["--set", set]);
        }
        run_ok("helm", &args, None, TIMEOUT);
    };
    let secret = format!("secret/{release}-webhook-tls");
    let read = || {
        run_ok(
            "kubectl",
            &[
                "get",
                &secret,
                "-n",
                &env.namespace,
                "-o",
                "jsonpath={.data}",
            ],
            None,
            TIMEOUT,
        )
    };
    let bundle = || {
        run_ok(
            "kubectl",
            &[
                "get",
                "validatingwebhookconfiguration",
                &format!("resourceclaims.{domain}"),
                "-o",
                "jsonpath={.webhooks[0].clientConfig.caBundle}",
            ],
            None,
            TIMEOUT,
        )
    };
    helm("install");
    let uninstall = Uninstall {
        release: release.clone(),
        namespace: env.namespace.clone(),
    };
    let installed = read();
    assert!(installed.contains("tls.crt"), "{installed}");
    let installed_bundle = bundle();
    helm("upgrade");
    assert_eq!(read(), installed, "the Secret changed on upgrade");
    assert_eq!(
        bundle(),
        installed_bundle,
        "the CA bundle changed on upgrade"
    );
    drop(uninstall);
    env.cleanup().await;
}

/// `helm uninstall` of a release, also after a failure.
struct Uninstall {
    release: String,
    namespace: String,
}

impl Drop for Uninstall {
    fn drop(&mut self) {
        let args = ["uninstall", &self.release, "-n", &self.namespace];
        support::tools::run("helm", &args, None, TIMEOUT);
    }
}

//! More of the ResourceHandle controller on the real control plane: Poolboy's ResourceWatch
//! objects (Δ§2.2), the ignore label and restores from a backup (§7.6), linked providers
//! end to end (§9, Δ B22), and health, readiness and summary of an AnarchySubject-like kind
//! recomputed on every managed-resource event (§13, Δ B23). Handles are created directly.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use poolboy::api::{OperatorDomain, ResourceHandle, ResourceProvider};
use poolboy::controller::kinds::{Kinds, WatchObject};
use poolboy::core::naming::resource_watch_name;
use serde_json::{Value, json};

use support::objects::{self, D, merged, resource_name};
use support::operator::TestOperator;
use support::{TestEnv, eventually, gone};

const TIMEOUT: Duration = Duration::from_secs(30);
async fn create_provider(env: &TestEnv, name: &str, spec: Value) {
    env.create(&objects::provider(name, spec)).await;
}

/// A provider of objects of `api_version`/`kind` in the test namespace; `extra` is merged
/// into its spec.
async fn create_kind_provider(
    env: &TestEnv,
    name: &str,
    api_version: &str,
    kind: &str,
    extra: Value,
) {
    let spec = json!({
        "override": {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"namespace": env.namespace},
        },
    });
    create_provider(env, name, merged(spec, extra)).await;
}

/// Creates the handle `metadata` + `spec` (named `guid-…` by the API server when `metadata`
/// has no name).
async fn create_handle(env: &TestEnv, metadata: Value, spec: Value) -> ResourceHandle {
    env.create(&objects::handle(metadata, spec)).await
}

/// `spec.resources` with one entry per `(name, provider, template)`.
fn resources(env: &TestEnv, entries: &[(&str, &str, Value)]) -> Value {
    let entries: Vec<Value> = entries
        .iter()
        .map(|(name, provider, template)| {
            json!({"name": name, "provider": objects::provider_ref(provider, &env.namespace), "template": template})
        })
        .collect();
    json!(entries)
}

fn guid(handle: &ResourceHandle) -> String {
    handle
        .name_any()
        .strip_prefix("guid-")
        .expect("guid- name")
        .to_owned()
}

async fn handle(env: &TestEnv, name: &str) -> Option<ResourceHandle> {
    env.api::<ResourceHandle>().get_opt(name).await.ok()?
}

async fn handle_status(env: &TestEnv, name: &str) -> Option<Value> {
    serde_json::to_value(handle(env, name).await?.status?).ok()
}

async fn configmap(env: &TestEnv, name: &str) -> Option<ConfigMap> {
    env.api::<ConfigMap>().get_opt(name).await.ok()?
}

async fn set_ignored(env: &TestEnv, name: &str, ignored: bool) {
    let value = if ignored { json!("") } else { Value::Null };
    let patch = json!({"metadata": {"labels": {format!("{D}/ignore"): value}}});
    env.api::<ResourceHandle>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("label the handle");
}

/// Waits until handle `name` has a status whose every resource has a reference and a live
/// state, and whose `Valid` condition is true: a reconcile went all the way through. For
/// providers without a readinessCheck: there, only a resource without state is `ready: false`
/// (§13).
async fn managed_through(env: &TestEnv, name: &str) -> Value {
    eventually("the handle is managed through", TIMEOUT, || async {
        let status = handle_status(env, name).await?;
        let resources = status["resources"].as_array()?;
        let valid = status["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Valid" && c["status"] == "True");
        let created = resources
            .iter()
            .all(|r| r["reference"].is_object() && r["ready"] != false);
        (valid && created).then_some(status)
    })
    .await
}

fn watches_api(env: &TestEnv) -> Api<WatchObject> {
    let kinds = Kinds::new(&OperatorDomain::default());
    Api::namespaced_with(env.client.clone(), &env.namespace, &kinds.watch)
}

#[tokio::test]
async fn resource_watch_objects_are_declared_adopted_and_kept() {
    let env = TestEnv::new().await;
    create_kind_provider(&env, "config", "v1", "ConfigMap", json!({})).await;
    create_kind_provider(&env, "secret", "v1", "Secret", json!({})).await;
    let watches = watches_api(&env);
    // One made by Poolboy before the switch-over: adopted as it is.
    let secret_watch = resource_watch_name("v1", "Secret", Some(&env.namespace));
    let existing: WatchObject = serde_json::from_value(json!({
        "apiVersion": format!("{D}/v1"),
        "kind": "ResourceWatch",
        "metadata": {"name": secret_watch, "labels": {"made-by": "poolboy-1.17"}},
        "spec": {"apiVersion": "v1", "kind": "Secret", "namespace": env.namespace},
    }))
    .expect("valid ResourceWatch");
    let existing = watches
        .create(&PostParams::default(), &existing)
        .await
        .expect("create the existing ResourceWatch");

    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let spec = json!({"resources": resources(&env, &[
        ("cm", "config", json!({})),
        ("secret", "secret", json!({})),
    ])});
    let first = create_handle(&env, json!({}), spec.clone()).await;
    managed_through(&env, &first.name_any()).await;
    let secret = resource_name(&first.name_any(), 1);
    assert!(
        env.api::<Secret>()
            .get_opt(&secret)
            .await
            .expect("get")
            .is_some(),
        "the Secret was created although its ResourceWatch existed"
    );

    let configmap_watch = resource_watch_name("v1", "ConfigMap", Some(&env.namespace));
    assert!(configmap_watch.starts_with(&format!("{}-", env.namespace)));
    let created = watches
        .get_opt(&configmap_watch)
        .await
        .expect("get")
        .expect("the ConfigMap ResourceWatch exists");
    assert_eq!(
        serde_json::to_value(&created.spec).expect("spec"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "namespace": env.namespace})
    );
    let adopted = watches.get(&secret_watch).await.expect("get");
    assert_eq!(adopted.uid(), existing.uid(), "not replaced");
    assert_eq!(adopted.labels()["made-by"], "poolboy-1.17");

    // A second handle of the same kinds uses the same objects; deleting handles leaves them.
    let second = create_handle(&env, json!({}), spec).await;
    managed_through(&env, &second.name_any()).await;
    for handle in [&first, &second] {
        env.api::<ResourceHandle>()
            .delete(&handle.name_any(), &DeleteParams::default())
            .await
            .expect("delete handle");
    }
    for handle in [&first, &second] {
        let name = handle.name_any();
        gone(&env.api::<ResourceHandle>(), &name, TIMEOUT).await;
    }
    let all = watches.list(&ListParams::default()).await.expect("list");
    let mut names: Vec<String> = all.items.iter().map(ResourceExt::name_any).collect();
    names.sort();
    let mut expected = vec![configmap_watch, secret_watch];
    expected.sort();
    assert_eq!(names, expected, "one object per watched kind, none deleted");

    env.teardown([operator]).await;
}

#[tokio::test]
async fn an_ignored_handle_is_left_alone_until_the_label_is_removed() {
    let env = TestEnv::new().await;
    create_kind_provider(
        &env,
        "config",
        "v1",
        "ConfigMap",
        json!({
            "updateFilters": [{"pathMatch": "/data/.*"}],
        }),
    )
    .await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let spec = |data: &str| json!({"resources": resources(&env, &[("cm", "config", json!({"data": {"v": data}}))])});
    let ignore = json!({"labels": {format!("{D}/ignore"): ""}});
    let ignored = create_handle(&env, ignore, spec("one")).await;
    let name = ignored.name_any();
    let cm_name = resource_name(&ignored.name_any(), 0);

    // A handle created after it, managed through, is the barrier: the ignored one was seen.
    let barrier = create_handle(&env, json!({}), spec("one")).await;
    managed_through(&env, &barrier.name_any()).await;
    let untouched = handle(&env, &name).await.expect("the ignored handle");
    assert!(untouched.status.is_none(), "no status written");
    assert!(untouched.finalizers().is_empty(), "no finalizer added");
    assert!(configmap(&env, &cm_name).await.is_none(), "nothing created");

    // Management resumes when the label goes.
    set_ignored(&env, &name, false).await;
    let cm = eventually("the ConfigMap", TIMEOUT, || configmap(&env, &cm_name)).await;
    assert_eq!(cm.data.expect("data")["v"], "one");
    managed_through(&env, &name).await;
    assert_eq!(
        handle(&env, &name).await.expect("handle").finalizers(),
        [D.to_owned()]
    );

    // Ignored again: a template change is not applied, a deleted resource is not recreated.
    set_ignored(&env, &name, true).await;
    let edit =
        json!([{"op": "replace", "path": "/spec/resources/0/template/data/v", "value": "two"}]);
    env.api::<ResourceHandle>()
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(edit).expect("patch")),
        )
        .await
        .expect("edit the ignored handle");
    env.api::<ConfigMap>()
        .delete(&cm_name, &DeleteParams::default())
        .await
        .expect("delete the ConfigMap");
    let barrier = create_handle(&env, json!({}), spec("one")).await;
    managed_through(&env, &barrier.name_any()).await;
    assert!(
        configmap(&env, &cm_name).await.is_none(),
        "an ignored handle does not recreate its resource"
    );

    set_ignored(&env, &name, false).await;
    let cm = eventually("the ConfigMap is recreated", TIMEOUT, || {
        configmap(&env, &cm_name)
    })
    .await;
    assert_eq!(cm.data.expect("data")["v"], "two");

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_handle_restored_from_a_backup_adopts_its_resources() {
    let env = TestEnv::new().await;
    create_kind_provider(
        &env,
        "config",
        "v1",
        "ConfigMap",
        json!({
            "updateFilters": [{"pathMatch": "/data/.*"}],
            "readinessCheck": "data.v | default('') == 'restored'",
        }),
    )
    .await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);

    // As a backup tool restores them: the handle with the ignore label, its finalizer and its
    // status (written through the status subresource, as it cannot come with the create),
    // and the resource it made, under a name the handle would not generate today.
    let name = format!("guid-{}", support::random_suffix());
    let metadata = json!({
        "name": name,
        "labels": {format!("{D}/ignore"): ""},
        "finalizers": [D],
    });
    let spec = json!({"resources": resources(&env, &[(
        "cm", "config", json!({"data": {"v": "restored"}}),
    )])});
    let restored = create_handle(&env, metadata, spec).await;
    let reference = json!({
        "apiVersion": "v1", "kind": "ConfigMap", "name": "from-backup", "namespace": env.namespace,
    });
    let status = json!({"status": {"resources": [{"name": "cm", "reference": reference}]}});
    env.api::<ResourceHandle>()
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("restore the status");
    let annotations = json!({
        format!("{D}/resource-handle-name"): name,
        format!("{D}/resource-handle-namespace"): env.namespace,
        format!("{D}/resource-handle-uid"): "00000000-0000-0000-0000-000000000000",
        format!("{D}/resource-index"): "0",
        format!("{D}/resource-provider-name"): "config",
        format!("{D}/resource-provider-namespace"): env.namespace,
    });
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "from-backup", "annotations": annotations},
        "data": {"v": "as backed up"},
    }))
    .expect("valid ConfigMap");
    let before = env
        .api::<ConfigMap>()
        .create(&PostParams::default(), &cm)
        .await
        .expect("restore the ConfigMap");

    set_ignored(&env, &name, false).await;
    let cm = eventually("the restored ConfigMap is patched", TIMEOUT, || async {
        let cm = configmap(&env, "from-backup").await?;
        (cm.data.as_ref()?.get("v")?.as_str() == "restored").then_some(cm)
    })
    .await;
    assert_eq!(cm.uid(), before.uid(), "patched, not recreated");
    assert_eq!(
        cm.annotations()[&format!("{D}/resource-handle-uid")],
        restored.uid().expect("uid"),
        "the annotations follow the restored handle"
    );
    let status = eventually("the restored handle is ready", TIMEOUT, || async {
        let status = handle_status(&env, &name).await?;
        (status["ready"] == true).then_some(status)
    })
    .await;
    assert_eq!(status["resources"][0]["reference"], reference);
    let owned: Vec<String> = env
        .configmaps_of_handle(&name)
        .await
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(
        owned,
        ["from-backup"],
        "no duplicate under a generated name"
    );
    let guid0 = resource_name(&name, 0);
    assert!(configmap(&env, &guid0).await.is_none());

    env.teardown([operator]).await;
}

/// `base` makes a ConfigMap whose `data.which` is its parameter; `app-a` and `app-b` each link
/// it under a resource name of their own and copy what their link holds.
async fn create_linked_providers(env: &TestEnv) {
    create_kind_provider(
        env,
        "base",
        "v1",
        "ConfigMap",
        json!({
            "parameters": [{"name": "which", "required": true}],
            "template": {"enable": true, "definition": {"data": {"which": "{{ which }}"}}},
        }),
    )
    .await;
    for (app, resource_name) in [("app-a", "first"), ("app-b", "second")] {
        create_provider(
            env,
            app,
            json!({
                "linkedResourceProviders": [{
                    "name": "base",
                    "resourceName": resource_name,
                    "parameterValues": {"which": resource_name},
                    "waitFor": "linked_resource_state.data.which is defined",
                    "templateVars": [
                        {"name": "base_which", "from": "/data/which"},
                        {"name": "base_name", "from": "/metadata/name"},
                    ],
                }],
                "template": {"enable": true},
                "override": {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"namespace": env.namespace},
                    "data": {"which": "{{ base_which }}", "name": "{{ base_name }}"},
                },
            }),
        )
        .await;
    }
}

fn resource_names(handle: &ResourceHandle) -> Vec<(String, String)> {
    handle
        .spec
        .resources
        .iter()
        .flatten()
        .map(|r| (r.name.clone().unwrap_or_default(), r.provider.name.clone()))
        .collect()
}

#[tokio::test]
async fn the_same_linked_provider_twice_each_dependent_finding_its_own() {
    let env = TestEnv::new().await;
    create_linked_providers(&env).await;
    // A linked-only aggregator: no resource of its own, a summary over the others.
    create_provider(
        &env,
        "pair",
        json!({
            "linkedResourceProviders": [{"name": "app-a"}, {"name": "app-b"}],
            "statusSummaryTemplate": {
                "names": "{{ resources | map(attribute='name') | join(',') }}",
            },
        }),
    )
    .await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let pair = create_handle(&env, json!({}), json!({"provider": {"name": "pair"}})).await;
    let name = pair.name_any();
    let g = guid(&pair);

    for (index, expected) in [(1, "first"), (3, "second")] {
        let app = format!("guid{index}-{g}");
        let data = eventually("a dependent ConfigMap", TIMEOUT, || async {
            configmap(&env, &app).await?.data
        })
        .await;
        assert_eq!(data["which"], expected, "{app} found its own link");
        assert_eq!(data["name"], format!("guid{}-{g}", index - 1));
    }
    let base = configmap(&env, &format!("guid2-{g}"))
        .await
        .expect("second base");
    assert_eq!(base.data.expect("data")["which"], "second");
    let live = handle(&env, &name).await.expect("handle");
    let expected: Vec<(String, String)> = [
        ("first", "base"),
        ("app-a", "app-a"),
        ("second", "base"),
        ("app-b", "app-b"),
    ]
    .iter()
    .map(|(n, p)| ((*n).to_owned(), (*p).to_owned()))
    .collect();
    assert_eq!(
        resource_names(&live),
        expected,
        "nothing of the aggregator's own"
    );
    eventually("the aggregator's summary", TIMEOUT, || async {
        let status = handle_status(&env, &name).await?;
        (status["summary"] == json!({"names": "first,app-a,second,app-b"})).then_some(())
    })
    .await;
    assert_eq!(env.configmaps_of_handle(&name).await.len(), 4);

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_false_when_leaves_a_linked_provider_out_until_it_holds() {
    let env = TestEnv::new().await;
    create_linked_providers(&env).await;
    create_provider(
        &env,
        "bundle",
        json!({
            "parameters": [{"name": "with_b", "default": {"value": false}}],
            "linkedResourceProviders": [
                {"name": "app-a"},
                {"name": "app-b", "when": "with_b | bool"},
            ],
        }),
    )
    .await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let bundle = create_handle(&env, json!({}), json!({"provider": {"name": "bundle"}})).await;
    let name = bundle.name_any();
    let g = guid(&bundle);
    let app_a = format!("guid1-{g}");
    eventually("app-a's ConfigMap", TIMEOUT, || configmap(&env, &app_a)).await;
    managed_through(&env, &name).await;
    let live = handle(&env, &name).await.expect("handle");
    let names: Vec<String> = resource_names(&live).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["first", "app-a"], "app-b is left out");
    assert_eq!(env.configmaps_of_handle(&name).await.len(), 2);

    let patch = json!({"spec": {"provider": {"parameterValues": {"with_b": true}}}});
    env.api::<ResourceHandle>()
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("turn app-b on");
    let data = eventually("app-b's ConfigMap", TIMEOUT, || async {
        configmap(&env, &format!("guid3-{g}")).await?.data
    })
    .await;
    assert_eq!(data["which"], "second");
    let live = handle(&env, &name).await.expect("handle");
    let names: Vec<String> = resource_names(&live).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["first", "app-a", "second", "app-b"]);

    env.teardown([operator]).await;
}

fn example(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// Installs the AnarchySubject stand-in (cluster-scoped: another test may have made it).
async fn install_anarchy_subjects(client: &Client) {
    let crd: CustomResourceDefinition =
        serde_json::from_value(example("anarchy-subject-crd.yaml")).expect("a CRD");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating the AnarchySubject CRD: {error}"),
    }
    let name = crd.name_any();
    tokio::time::timeout(
        support::SETTLE_TIMEOUT,
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await
    .expect("the AnarchySubject CRD is established")
    .expect("watching the CRD");
}

#[tokio::test]
async fn an_anarchy_subject_status_change_flips_health_readiness_and_summary() {
    let env = TestEnv::new().await;
    install_anarchy_subjects(&env.client).await;
    // The example provider, moved into the test namespace; its lifespan is for claims.
    let mut lab = example("provider-lab.yaml");
    lab["metadata"]["namespace"] = json!(env.namespace);
    lab["spec"]["override"]["metadata"]["namespace"] = json!(env.namespace);
    if let Some(spec) = lab["spec"].as_object_mut() {
        spec.remove("lifespan");
    }
    let summary_template = &mut lab["spec"]["statusSummaryTemplate"];
    summary_template["provision"] =
        json!("{{ resources[0].state.status.towerJobs.provision.status | default('pending') }}");
    let lab: ResourceProvider = serde_json::from_value(lab).expect("the lab provider");
    env.api::<ResourceProvider>()
        .create(&PostParams::default(), &lab)
        .await
        .expect("create the lab provider");
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    // Template defaults are evaluated for claims only (§8): an unbound handle gives them.
    let values = json!({"region": "eu-west", "password": "secret"});
    let spec = json!({"provider": {"name": "lab", "parameterValues": values}});
    let handle = create_handle(&env, json!({}), spec).await;
    let name = handle.name_any();

    let subjects_kind = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("anarchy.gpte.redhat.com", "v1", "AnarchySubject"),
        "anarchysubjects",
    );
    let subjects: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &subjects_kind);
    let subject = format!("lab-{}", guid(&handle));
    let created = eventually("the AnarchySubject", TIMEOUT, || async {
        subjects.get_opt(&subject).await.ok()?
    })
    .await;
    assert_eq!(
        created.data["spec"]["vars"]["job_vars"]["region"],
        "eu-west"
    );

    let expect = |healthy: Value, ready: Value, state: &'static str, provision: &'static str| {
        let name = name.clone();
        let env = &env;
        async move {
            let what = format!("healthy {healthy}, ready {ready}, {state}/{provision}");
            eventually(&what, TIMEOUT, || async {
                let status = handle_status(env, &name).await?;
                let summary = json!({"region": "eu-west", "state": state, "provision": provision});
                (status.get("healthy").unwrap_or(&Value::Null) == &healthy
                    && status["ready"] == ready
                    && status["resources"][0]["ready"] == ready
                    && status["summary"] == summary)
                    .then_some(())
            })
            .await;
        }
    };
    // No towerJobs yet: healthy, not ready.
    expect(json!(true), json!(false), "new", "pending").await;

    let set_status = |job: &'static str| {
        let subjects = subjects.clone();
        let subject = subject.clone();
        async move {
            let patch = json!({"status": {"towerJobs": {"provision": {"status": job}}}});
            subjects
                .patch_status(&subject, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("patch the subject status");
        }
    };
    set_status("successful").await;
    expect(json!(true), json!(true), "new", "successful").await;

    let started = json!({"spec": {"vars": {"current_state": "started"}}});
    subjects
        .patch(&subject, &PatchParams::default(), &Patch::Merge(&started))
        .await
        .expect("patch the subject spec");
    expect(json!(true), json!(true), "started", "successful").await;

    set_status("failed").await;
    expect(json!(false), json!(false), "started", "failed").await;

    env.teardown([operator]).await;
}

//! The watches of managed resources on the real control plane: Poolboy's ResourceWatch
//! objects are declared, adopted and kept (Δ§2.2), and health, readiness and summary of an
//! AnarchySubject-like kind are recomputed on every event of it (§13, Δ B23). Handles are
//! created directly; the whole operator runs.

mod support;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use poolboy::api::kinds::{Kinds, WatchObject};
use poolboy::api::{OperatorDomain, ResourceHandle, ResourceProvider};
use poolboy::core::naming::resource_watch_name;
use serde_json::{Value, json};
use support::fixtures::{
    create_handle, create_kind_provider, example, guid, handle_status, install_anarchy_subjects,
    managed_through,
};
use support::objects::{self, D, resource_name};
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually, gone};

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

    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let spec = json!({"resources": objects::resources(&env.namespace, &[
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
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
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

/// A handle's resources in a namespace that is then deleted: once its watch holds no object
/// and no reader has looked it up for its idle time, the watch stops (the
/// `poolboy_managed_watches` gauge falls back); a handle that makes a resource in a namespace
/// of that name again starts it again.
#[tokio::test]
async fn the_watch_of_a_deleted_namespace_stops_and_starts_again_when_needed() {
    let env = TestEnv::new().await;
    let elsewhere = format!("{}-gone", env.namespace);
    let override_namespace = json!({"override": {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": elsewhere},
    }});
    create_kind_provider(&env, "elsewhere", "v1", "ConfigMap", override_namespace).await;
    let address = support::http::free_address();
    let operator = TestOperator::start_configured(
        env.kube_config(),
        &env.namespace,
        Some(address),
        "idle-watches",
        |config| config.managed_watch_idle = std::time::Duration::from_secs(2),
    );
    let watches = || async move {
        let (_, text) = support::http::get(address, "/metrics").await;
        text.lines()
            .find_map(|line| line.strip_prefix("poolboy_managed_watches "))
            .and_then(|value| value.trim().parse::<u32>().ok())
    };
    let namespaces = Api::<Namespace>::all(env.client.clone());
    let spec =
        json!({"resources": objects::resources(&env.namespace, &[("cm", "elsewhere", json!({}))])});
    for round in ["first", "again"] {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": elsewhere}})).expect("a namespace");
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("create the namespace");
        let handle = create_handle(&env, json!({}), spec.clone()).await;
        managed_through(&env, &handle.name_any()).await;
        eventually(
            &format!("the namespace's watch running ({round})"),
            TIMEOUT,
            || async { (watches().await == Some(1)).then_some(()) },
        )
        .await;
        env.api::<ResourceHandle>()
            .delete(&handle.name_any(), &DeleteParams::default())
            .await
            .expect("delete handle");
        gone(&env.api::<ResourceHandle>(), &handle.name_any(), TIMEOUT).await;
        namespaces
            .delete(&elsewhere, &DeleteParams::default())
            .await
            .expect("delete the namespace");
        gone(&namespaces, &elsewhere, TIMEOUT).await;
        eventually(
            &format!("the namespace's watch stopped ({round})"),
            TIMEOUT,
            || async { (watches().await == Some(0)).then_some(()) },
        )
        .await;
    }
    env.teardown([operator]).await;
}

//! Status that converges while other writers keep changing the object (Δ§8): a bound claim's
//! status under annotation and template edits (Δ B06), a handle's `status.resources` under
//! concurrent edits (Δ B08) and under `spec.resources` changing length (Δ B09). The whole
//! operator runs; the `config` provider of `support::config` makes ConfigMaps.

mod support;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use poolboy::api::{ResourceClaim, ResourceHandle};
use serde_json::{Value, json};
use support::apis::bound;
use support::config::{
    config_resources, create_config_claim, create_config_provider, ready_handle,
};
use support::fixtures::{
    await_object, configmap, configmaps_of, create_named_handle, guid_name, handles_of_claim,
    json_of, merge,
};
use support::objects::resource_name;
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually, from_json};

/// Δ B06 (#154): while other writers keep changing a bound claim (annotations, and template
/// edits that go on to the handle), its status still converges: it mirrors its handle's
/// readiness, every edit survives, the last template edit reaches the ConfigMap, and the claim
/// keeps its one handle.
#[tokio::test]
async fn b06_claim_status_converges_under_concurrent_edits() {
    let env = TestEnv::new().await;
    create_config_provider(&env, true).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_config_claim(&env, "busy", json!({}), json!({}), json!({"n": "0"})).await;
    let handle = bound(&env, "busy").await;
    let cm = resource_name(&handle, 0);
    eventually("the ConfigMap", TIMEOUT, || configmap(&env, &cm)).await;

    const EDITS: usize = 25;
    let claims: Api<ResourceClaim> = env.api();
    let annotate = {
        let claims = claims.clone();
        tokio::spawn(async move {
            for i in 1..=EDITS {
                let patch =
                    json!({"metadata": {"annotations": {"example.com/edit": i.to_string()}}});
                merge(&claims, "busy", patch).await;
            }
        })
    };
    let retemplate = {
        let claims = claims.clone();
        tokio::spawn(async move {
            for i in 1..=EDITS {
                let patch = json!([{"op": "replace", "path": "/spec/resources/0/template/data/n",
                                    "value": i.to_string()}]);
                claims
                    .patch(
                        "busy",
                        &PatchParams::default(),
                        &Patch::Json::<()>(from_json(patch)),
                    )
                    .await
                    .expect("editing the claim template");
            }
        })
    };
    merge(
        &env.api::<ConfigMap>(),
        &cm,
        json!({"metadata": {"labels": {"ready": "yes"}}}),
    )
    .await;
    annotate.await.expect("annotating");
    retemplate.await.expect("editing");

    let claim = await_object(&claims, "busy", "ready, mirrored from its handle", |c| {
        c["status"]["ready"] == true
    })
    .await;
    assert_eq!(
        claim["metadata"]["annotations"]["example.com/edit"],
        EDITS.to_string()
    );
    assert_eq!(claim["status"]["resourceHandle"]["name"], handle.as_str());
    eventually(
        "the last template edit reaches the ConfigMap",
        TIMEOUT,
        || async {
            let data = configmap(&env, &cm).await?.data?;
            (data.get("n")? == &EDITS.to_string()).then_some(())
        },
    )
    .await;
    assert_eq!(handles_of_claim(&env, "busy").await, [handle]);

    env.teardown([operator]).await;
}

/// Δ B08: a handle's `status.resources` is initialised and kept race-safe while other writers
/// keep changing the handle: exactly one entry per resource, each with its reference, and
/// exactly one ConfigMap per resource.
#[tokio::test]
async fn b08_handle_status_converges_under_concurrent_edits() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let name = guid_name("busy");
    let entries = [
        ("a", json!({"v": "a"})),
        ("b", json!({"v": "b"})),
        ("c", json!({"v": "c"})),
    ];
    let handles_api: Api<ResourceHandle> = env.api();
    let writers: Vec<_> = (0..2)
        .map(|writer| {
            let api = handles_api.clone();
            let name = name.clone();
            tokio::spawn(async move {
                for i in 0..25 {
                    let patch = json!({"metadata": {"annotations": {
                        format!("example.com/writer-{writer}"): i.to_string()}}});
                    // The handle may not exist for the first few edits.
                    let _ = api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    create_named_handle(
        &env,
        &name,
        json!({}),
        json!({"resources": config_resources(&env, &entries)}),
    )
    .await;
    for writer in writers {
        writer.await.expect("a writer");
    }

    let status = ready_handle(&env, &name).await;
    let resources = status["status"]["resources"].as_array().expect("resources");
    let names: Vec<&str> = resources
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    let expected: BTreeSet<String> = (0..3).map(|i| resource_name(&name, i)).collect();
    for (i, resource) in resources.iter().enumerate() {
        assert_eq!(
            resource["reference"]["name"],
            resource_name(&name, i).as_str()
        );
    }
    assert_eq!(configmaps_of(&env, &name).await, expected);

    env.teardown([operator]).await;
}

/// Δ B09 (#156): `spec.resources` changing length under the controller (growing and
/// shrinking, faster than it reconciles) never breaks it: the status ends with exactly the
/// final spec's entries, each managed through, and the operator never panics.
#[tokio::test]
async fn b09_handle_status_follows_concurrent_spec_length_changes() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let name = guid_name("resized");
    let spec_of = |count: usize| {
        let entries: Vec<(String, Value)> = (0..count)
            .map(|i| (format!("r{i}"), json!({"i": i.to_string()})))
            .collect();
        let entries: Vec<(&str, Value)> = entries
            .iter()
            .map(|(n, d)| (n.as_str(), d.clone()))
            .collect();
        config_resources(&env, &entries)
    };
    create_named_handle(&env, &name, json!({}), json!({"resources": spec_of(1)})).await;
    let handles_api: Api<ResourceHandle> = env.api();
    for count in [3, 1, 4, 2, 5, 1, 3, 2] {
        merge(
            &handles_api,
            &name,
            json!({"spec": {"resources": spec_of(count)}}),
        )
        .await;
        tokio::task::yield_now().await;
    }

    let status = eventually("the status follows the final spec", TIMEOUT, || async {
        let handle = json_of(&handles_api, &name).await?;
        let resources = handle["status"]["resources"].as_array()?.clone();
        let names: Vec<&str> = resources
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        let through = resources
            .iter()
            .all(|r| r["reference"].is_object() && r["ready"] == true);
        (names == ["r0", "r1"] && through).then_some(handle)
    })
    .await;
    let valid = status["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Valid" && c["status"] == "True")
    });
    assert!(valid, "{status}");
    for i in 0..2 {
        let cm = configmap(&env, &resource_name(&name, i))
            .await
            .expect("a ConfigMap");
        assert_eq!(cm.data.expect("data")["i"], i.to_string());
    }

    // stop() re-raises a panic of the operator task.
    env.teardown([operator]).await;
}

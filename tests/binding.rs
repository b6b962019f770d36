//! Which handle a claim gets, and what binding writes on it, on the real control plane: a
//! handle about to end is skipped (Δ B04), `preferenceScore` wins before age (Δ B05), a
//! provider claim's effective values are recorded on the handle it binds (Δ B20), a warm bind
//! is recorded once and leaves the handle's status alone, a cold bind is recorded once with
//! the resource its handle made, and a claim deleted while it binds
//! leaves no handle bound (§7.3). The whole operator runs; the `config`
//! provider of `support::config` makes ConfigMaps.

mod support;

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};
use poolboy::api::{ResourceClaim, ResourceHandle};
use serde_json::{Value, json};
use support::apis::bound;
use support::config::{
    config_resources, create_config_claim, create_config_provider, ready_handle, template,
};
use support::fixtures::{
    a_second_after, create_named_handle, create_pool, created, guid_name, handles, is_unbound,
    json_of, record_versions, rfc3339, unbound_of,
};
use support::objects;
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually};

/// Δ B04 (#152): a handle whose `spec.lifespan.end` is under 120 s away is never bound, even
/// when it is the oldest match; the claim gets the other one.
#[tokio::test]
async fn b04_handle_near_lifespan_end_is_not_bound() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let end = rfc3339(Utc::now() + TimeDelta::seconds(100));
    let near = guid_name("near");
    create_named_handle(
        &env,
        &near,
        json!({}),
        json!({"lifespan": {"end": end}, "resources": config_resources(&env, &[("config", json!({}))])}),
    )
    .await;
    let near_status = ready_handle(&env, &near).await;
    a_second_after(created(&near_status)).await;
    let far = guid_name("far");
    create_named_handle(
        &env,
        &far,
        json!({}),
        json!({"resources": config_resources(&env, &[("config", json!({}))])}),
    )
    .await;
    let far_status = ready_handle(&env, &far).await;
    assert!(
        created(&near_status) < created(&far_status),
        "the near-end handle is older"
    );

    create_config_claim(&env, "claim", json!({}), json!({}), json!({"x": "1"})).await;
    assert_eq!(
        bound(&env, "claim").await,
        far,
        "the handle about to end is skipped"
    );
    let near_now = json_of(&env.api::<ResourceHandle>(), &near)
        .await
        .expect("near handle");
    assert!(near_now["spec"]["resourceClaim"].is_null(), "{near_now}");
    assert_eq!(handles(&env).await.len(), 2, "nothing created");

    env.teardown([operator]).await;
}

/// Δ B05 (#148), acceptance (a): among matching, ready handles, the higher `preferenceScore`
/// wins before age: the newest handle, scored 5, is bound before an older one scored 0.
#[tokio::test]
async fn b05_preference_score_wins_before_age() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let spec = |score: f64| json!({"preferenceScore": score, "resources": config_resources(&env, &[("config", json!({}))])});
    let old = guid_name("old");
    create_named_handle(&env, &old, json!({}), spec(0.0)).await;
    let old_status = ready_handle(&env, &old).await;
    a_second_after(created(&old_status)).await;
    let preferred = guid_name("preferred");
    create_named_handle(&env, &preferred, json!({}), spec(5.0)).await;
    let preferred_status = ready_handle(&env, &preferred).await;
    assert!(created(&old_status) < created(&preferred_status));

    create_config_claim(&env, "first", json!({}), json!({}), json!({})).await;
    assert_eq!(
        bound(&env, "first").await,
        preferred,
        "the higher score wins"
    );
    create_config_claim(&env, "second", json!({}), json!({}), json!({})).await;
    assert_eq!(bound(&env, "second").await, old, "then the remaining one");
    assert_eq!(handles(&env).await.len(), 2, "nothing created");

    env.teardown([operator]).await;
}

/// Δ B20 (#146): binding a provider claim to a pool handle sets the handle's `spec.provider`
/// to the claim's effective parameter values, defaults included.
#[tokio::test]
async fn b20_binding_a_provider_claim_records_its_effective_values_on_the_handle() {
    let env = TestEnv::new().await;
    let provider = objects::provider(
        "sized",
        json!({
            "override": {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"namespace": env.namespace}},
            "parameters": [
                {"name": "size", "default": {"value": "small"}},
                {"name": "colour", "default": {"value": "red"}},
            ],
            "template": {"enable": true, "definition": {"data": {"size": "{{ size }}"}}},
            "readinessCheck": "metadata.uid is defined",
        }),
    );
    env.create(&provider).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let pool = objects::pool(
        "sized",
        json!({"minAvailable": 1,
               "provider": {"name": "sized", "parameterValues": {"size": "large"}}}),
    );
    env.create(&pool).await;
    let pooled = eventually("a pool handle", TIMEOUT, || async {
        handles(&env).await.first().map(|h| h.name_any())
    })
    .await;
    ready_handle(&env, &pooled).await;
    let versions = record_versions::<ResourceHandle>(&env, &pooled).await;

    let claim = objects::claim(
        "sized",
        json!({"provider": {"name": "sized", "parameterValues": {"size": "large"}}}),
    );
    env.create(&claim).await;
    assert_eq!(
        bound(&env, "sized").await,
        pooled,
        "the pool handle is bound"
    );
    let handle = json_of(&env.api::<ResourceHandle>(), &pooled)
        .await
        .expect("handle");
    assert_eq!(
        handle["spec"]["provider"],
        json!({"name": "sized", "parameterValues": {"size": "large", "colour": "red"}})
    );
    // Set by the bind itself, not by a later write: no version of the handle was ever bound
    // with the pool's values only (its resources would have been made from them).
    let versions = versions.lock().expect("the record").clone();
    let bound_versions: Vec<&Value> = versions
        .iter()
        .filter(|h| h["spec"]["resourceClaim"].is_object())
        .collect();
    assert!(!bound_versions.is_empty(), "the watch saw the bind");
    for version in bound_versions {
        assert_eq!(
            version["spec"]["provider"]["parameterValues"]["colour"], "red",
            "a bound version without the claim's values: {version}"
        );
    }

    env.teardown([operator]).await;
}

/// The `config` provider, pool `name` of `min_available` handles of one resource named
/// `config` (as `create_config_claim` names it), and the operator.
async fn start_with_config_pool(env: &TestEnv, name: &str, min_available: usize) -> TestOperator {
    create_config_provider(env, false).await;
    let resources = [("config", "config", template(json!({})))];
    let spec = json!({
        "minAvailable": min_available,
        "resources": objects::resources(&env.namespace, &resources),
    });
    create_pool(env, name, spec).await;
    TestOperator::start(env.kube_config(), &env.namespace)
}

/// A warm bind writes the claim's status once, with its resource's state as the claim's
/// annotations left it, and nothing to the handle's status when the pool's resources carry
/// the names the claim gives them (the handle's conditions record no generation).
#[tokio::test]
async fn a_warm_bind_records_the_annotated_resource_and_leaves_the_handle_status() {
    let env = TestEnv::new().await;
    let operator = start_with_config_pool(&env, "named", 1).await;
    let handles_api = env.api::<ResourceHandle>();
    let pooled = eventually("the pool's handle, ready", TIMEOUT, || async {
        let handle = unbound_of(&env, "named").await.into_iter().next()?;
        let ready = handle.status.as_ref().and_then(|s| s.ready) == Some(true);
        ready.then_some(handle)
    })
    .await;

    create_config_claim(&env, "warm", json!({}), json!({}), json!({})).await;
    let claim = env.api::<ResourceClaim>();
    let recorded = eventually("the claim's recorded bind", TIMEOUT, || async {
        let claim = json_of(&claim, "warm").await?;
        claim["status"]["resourceHandle"]["name"]
            .is_string()
            .then_some(claim)
    })
    .await;
    assert_eq!(
        recorded["status"]["resourceHandle"]["name"].as_str(),
        pooled.metadata.name.as_deref()
    );
    let state = &recorded["status"]["resources"][0]["state"];
    let name = state["metadata"]["name"]
        .as_str()
        .expect("the recorded state");
    let configmap = json_of(&env.api::<ConfigMap>(), name)
        .await
        .expect("the handle's ConfigMap");
    let annotation = format!("{}/resource-claim-name", objects::D);
    assert_eq!(configmap["metadata"]["annotations"][&annotation], "warm");
    assert_eq!(
        state["metadata"]["resourceVersion"], configmap["metadata"]["resourceVersion"],
        "the state recorded is the annotated one"
    );
    // Anything the handle's pass after the bind wrote would be there by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let handle = handles_api
        .get(&pooled.name_any())
        .await
        .expect("the bound handle");
    assert_eq!(handle.status, pooled.status);
    env.teardown([operator]).await;
}

/// A cold bind writes the claim's status once: the first version of the claim that names the
/// handle made for it already carries the ConfigMap that handle made, its state and the
/// claim's readiness; and its one `Bound` Event says the resources are ready, with no `Ready`
/// Event after it.
#[tokio::test]
async fn a_cold_bind_records_the_made_resource_with_the_handle() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let versions = record_versions::<ResourceClaim>(&env, "cold").await;

    create_config_claim(&env, "cold", json!({}), json!({}), json!({})).await;
    let handle = bound(&env, "cold").await;
    let claims = env.api::<ResourceClaim>();
    eventually("the claim ready", TIMEOUT, || async {
        let claim = json_of(&claims, "cold").await?;
        (claim["status"]["ready"] == json!(true)).then_some(())
    })
    .await;
    let versions = versions.lock().expect("the record").clone();
    let first = versions
        .iter()
        .find(|c| c["status"]["resourceHandle"]["name"].is_string())
        .expect("a version naming the handle");
    assert_eq!(first["status"]["resourceHandle"]["name"], json!(handle));
    let resource = &first["status"]["resources"][0];
    assert!(resource["reference"]["name"].is_string(), "{first}");
    assert!(resource["state"]["metadata"]["uid"].is_string(), "{first}");
    assert_eq!(first["status"]["ready"], json!(true), "{first}");

    let bound_event = env.event("cold", "Normal", "Bound", TIMEOUT).await;
    let note = bound_event.note.unwrap_or_default();
    assert!(note.contains("created for the claim"), "{note}");
    assert!(note.ends_with("are ready"), "{note}");
    // Anything a later pass of the claim published would be there by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reasons: Vec<Option<String>> = env
        .events_about("cold")
        .await
        .into_iter()
        .map(|e| e.reason)
        .collect();
    assert_eq!(reasons, [Some("Bound".to_owned())]);
    env.teardown([operator]).await;
}

/// §7.3: a claim deleted while it binds takes its handle along, whenever the deletion lands.
/// Deleted between the bind and the status write that records it, the claim is finalized by
/// the reconcile that bound the handle (its status write conflicts with the deletion), and the
/// handle store may not show the bind yet: that reconcile must delete the handle itself. The
/// deletions are spread over the first 120 ms of 40 claims' lives, so that some land in that
/// window; afterwards no handle may stay bound.
#[tokio::test]
async fn claims_deleted_while_they_bind_leave_no_handle_bound() {
    let env = TestEnv::new().await;
    let operator = start_with_config_pool(&env, "quick", 5).await;
    eventually("the pool's handles", TIMEOUT, || async {
        (unbound_of(&env, "quick").await.len() == 5).then_some(())
    })
    .await;

    let claims = env.api::<ResourceClaim>();
    let lives = (0..40u64).map(|i| {
        let (env, claims) = (&env, claims.clone());
        async move {
            let name = format!("brief-{i:02}");
            create_config_claim(env, &name, json!({}), json!({}), json!({})).await;
            tokio::time::sleep(Duration::from_millis(i * 3)).await;
            claims
                .delete(&name, &DeleteParams::default())
                .await
                .expect("deleting the claim");
        }
    });
    futures::future::join_all(lives).await;

    let bound_left = eventually("every claim gone, no handle bound", TIMEOUT, || async {
        let left = claims.list(&ListParams::default()).await.ok()?.items;
        let bound: Vec<String> = handles(&env)
            .await
            .iter()
            .filter(|h| !is_unbound(h))
            .map(|h| h.name_any())
            .collect();
        (left.is_empty() && bound.is_empty()).then_some(bound)
    })
    .await;
    assert!(bound_left.is_empty());
    env.teardown([operator]).await;
}

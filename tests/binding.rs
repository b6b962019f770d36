//! Which handle a claim gets, and what binding writes on it, on the real control plane: a
//! handle about to end is skipped (Δ B04), `preferenceScore` wins before age (Δ B05), and a
//! provider claim's effective values are recorded on the handle it binds (Δ B20). The whole
//! operator runs; the `config` provider of `support::config` makes ConfigMaps.

mod support;

use chrono::{TimeDelta, Utc};
use kube::ResourceExt;
use poolboy::api::ResourceHandle;
use serde_json::{Value, json};
use support::apis::bound;
use support::config::{
    config_resources, create_config_claim, create_config_provider, ready_handle,
};
use support::fixtures::{
    a_second_after, create_named_handle, created, guid_name, handles, json_of, record_versions,
    rfc3339,
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

//! Nothing a crash leaves behind survives, on the real control plane: a handle a
//! process bound and died before recording in its claim, a claim deleted while no broker ran
//! with such a handle, and a managed resource whose handle is gone. The whole operator runs;
//! the `config` provider of `support::config` makes ConfigMaps. The dead process's half-done
//! bind is its one write, made here by hand.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, PostParams};
use poolboy::api::{ResourceClaim, ResourceHandle};
use serde_json::{Value, json};
use support::apis::bound;
use support::config::{
    config_resources, create_config_claim, create_config_provider, ready_handle,
};
use support::fixtures::{configmaps_of, create_named_handle, guid_name, handle, merge};
use support::objects::{self, D};
use support::operator::TestOperator;
use support::{SETTLE_TIMEOUT, TIMEOUT, TestEnv, from_json, gone};

/// A free, ready handle with one `config` ConfigMap.
async fn ready_spare(env: &TestEnv, what: &str) -> String {
    let name = guid_name(what);
    create_named_handle(
        env,
        &name,
        json!({}),
        json!({"resources": config_resources(env, &[("config", json!({}))])}),
    )
    .await;
    ready_handle(env, &name).await;
    name
}

/// What a process writes when it binds `handle` to `claim`, before it records the handle in
/// the claim's status.
async fn bind_by_hand(env: &TestEnv, handle: &str, claim: &str) {
    let reference = json!({
        "apiVersion": format!("{D}/v1"), "kind": "ResourceClaim",
        "name": claim, "namespace": env.namespace,
    });
    merge(
        &env.api::<ResourceHandle>(),
        handle,
        json!({"spec": {"resourceClaim": reference}}),
    )
    .await;
}

/// A claim records handle A; a process that died had bound spare B to the same claim. B is
/// released and deleted with its ConfigMap, and the claim keeps A. Left alone, B would stay
/// bound, with its resources, for as long as the claim lived and after.
#[tokio::test]
async fn a_handle_bound_by_a_process_that_died_before_recording_it_is_deleted() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let first = ready_spare(&env, "first").await;
    create_config_claim(&env, "claim", json!({}), json!({}), json!({})).await;
    assert_eq!(bound(&env, "claim").await, first);
    let stray = ready_spare(&env, "stray").await;
    let stray_configmaps = configmaps_of(&env, &stray).await;
    assert_eq!(stray_configmaps.len(), 1);

    bind_by_hand(&env, &stray, "claim").await;

    gone(&env.api::<ResourceHandle>(), &stray, TIMEOUT).await;
    for configmap in &stray_configmaps {
        gone(&env.api::<ConfigMap>(), configmap, TIMEOUT).await;
    }
    let claim = env
        .api::<ResourceClaim>()
        .get("claim")
        .await
        .expect("the claim is still there");
    assert!(claim.metadata.deletion_timestamp.is_none());
    assert_eq!(
        bound(&env, "claim").await,
        first,
        "the claim keeps its handle"
    );
    assert!(handle(&env, &first).await.is_some());

    env.teardown([operator]).await;
}

/// A claim deleted while no broker ran, with a second handle bound to it by a process that
/// died: the next broker deletes the claim's handle, the stray one, and their ConfigMaps.
#[tokio::test]
async fn a_claim_deleted_while_the_broker_was_down_takes_every_handle_bound_to_it() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let first = ready_spare(&env, "first").await;
    let stray = ready_spare(&env, "stray").await;
    create_config_claim(&env, "claim", json!({}), json!({}), json!({})).await;
    let recorded = bound(&env, "claim").await;
    let stray = if recorded == first { stray } else { first };
    let mut configmaps = configmaps_of(&env, &recorded).await;
    configmaps.extend(configmaps_of(&env, &stray).await);
    assert_eq!(configmaps.len(), 2);
    operator.stop().await;

    bind_by_hand(&env, &stray, "claim").await;
    env.api::<ResourceClaim>()
        .delete("claim", &DeleteParams::default())
        .await
        .expect("deleting the claim");
    let operator = TestOperator::start(env.kube_config(), &env.namespace);

    gone(&env.api::<ResourceClaim>(), "claim", TIMEOUT).await;
    for name in [&recorded, &stray] {
        gone(&env.api::<ResourceHandle>(), name, TIMEOUT).await;
    }
    for configmap in &configmaps {
        gone(&env.api::<ConfigMap>(), configmap, TIMEOUT).await;
    }

    env.teardown([operator]).await;
}

/// A ConfigMap whose annotations name a handle that does not exist (it was deleted while a
/// reconcile of another process created the ConfigMap) is deleted; one of a live handle, and
/// one of nobody, are left alone.
#[tokio::test]
async fn a_managed_resource_whose_handle_is_gone_is_deleted() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    // A live handle: the broker now watches ConfigMaps of the test namespace.
    let live = ready_spare(&env, "live").await;
    let live_uid = handle(&env, &live)
        .await
        .and_then(|h| h.metadata.uid)
        .expect("the handle's uid");

    let annotated = |name: &str, handle: &str, uid: &str| -> ConfigMap {
        let annotations: serde_json::Map<String, Value> = [
            ("resource-handle-name", handle),
            ("resource-handle-namespace", env.namespace.as_str()),
            ("resource-handle-uid", uid),
        ]
        .into_iter()
        .map(|(key, value)| (objects::key(key), json!(value)))
        .collect();
        from_json(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "annotations": annotations},
            "data": {},
        }))
    };
    let configmaps = env.api::<ConfigMap>();
    let create = |configmap: ConfigMap| {
        let configmaps = configmaps.clone();
        async move {
            configmaps
                .create(&PostParams::default(), &configmap)
                .await
                .expect("creating a ConfigMap")
        }
    };
    create(annotated("orphan", &guid_name("gone"), "no-such-uid")).await;
    create(annotated("replaced", &live, "an-older-uid")).await;
    create(annotated("owned", &live, &live_uid)).await;
    create(from_json::<ConfigMap>(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unmanaged"},
    })))
    .await;

    gone(&configmaps, "orphan", SETTLE_TIMEOUT).await;
    gone(&configmaps, "replaced", SETTLE_TIMEOUT).await;
    // The sweep of a suspect starts within seconds of its event: by now it is long done.
    for name in ["owned", "unmanaged"] {
        let left = configmaps.get_opt(name).await.expect("reading a ConfigMap");
        assert!(left.is_some(), "{name} is left alone");
    }
    let value: Value = serde_json::to_value(handle(&env, &live).await).expect("json");
    assert!(value["metadata"]["deletionTimestamp"].is_null());

    env.teardown([operator]).await;
}

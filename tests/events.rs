//! What users read with `kubectl describe` (issue 13): the Normal Events of a claim's life, in
//! order, on the real control plane.

mod support;

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use poolboy::api::ResourcePool;
use serde_json::json;
use support::apis::Apis;
use support::config::{create_config_claim, create_config_provider, template};
use support::objects::{self, D};
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually, from_json, gone};

/// The reasons of the Normal Events about `regarding`, oldest first.
async fn normal_reasons(env: &TestEnv, regarding: &str) -> Vec<String> {
    let events: Api<Event> = env.api();
    let mut about: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .expect("listing Events")
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Normal"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(regarding))
        .collect();
    about.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    about.into_iter().filter_map(|e| e.reason).collect()
}

/// A pooled bind: the pool's handle says it created its ConfigMap; the claim says it was
/// bound from the pool, then that it is ready; once the claim is deleted, its handle says
/// why it goes.
#[tokio::test]
async fn a_pooled_bind_tells_its_milestones_in_order() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    create_config_provider(&env, true).await;
    let pool: ResourcePool = from_json(json!({
        "apiVersion": format!("{D}/v1"), "kind": "ResourcePool",
        "metadata": {"name": "events"},
        "spec": {
            "minAvailable": 1,
            "resources": objects::resources(&ns, &[("config", "config", template(json!({})))]),
        },
    }));
    env.create(&pool).await;
    let operator = TestOperator::start(env.kube_config(), &ns);
    let pooled = eventually("the pool's handle", TIMEOUT, || async {
        env.handles_of_pool("events")
            .await
            .first()
            .and_then(|h| h.metadata.name.clone())
    })
    .await;
    let configmap = env.configmap_of(&pooled, TIMEOUT).await;

    create_config_claim(&env, "eventful", json!({}), json!({}), json!({})).await;
    let apis = Apis::new(&env);
    let (_, handle) = apis.bound("eventful").await;
    assert_eq!(handle.metadata.name.as_deref(), Some(pooled.as_str()));
    env.label_configmap(&configmap, "ready", "yes").await;
    eventually("Bound, then Ready, on the claim", TIMEOUT, || async {
        let reasons = normal_reasons(&env, "eventful").await;
        (reasons == ["Bound", "Ready"]).then_some(())
    })
    .await;
    let bound = env
        .event("eventful", "Normal", "Bound", Duration::from_secs(5))
        .await;
    assert_eq!(
        bound.note.as_deref(),
        Some(format!("bound to ResourceHandle {pooled} from ResourcePool events").as_str())
    );
    assert_eq!(normal_reasons(&env, &pooled).await, ["ResourceCreated"]);

    apis.claims
        .delete("eventful", &DeleteParams::default())
        .await
        .expect("deleting the claim");
    gone(&apis.handles, &pooled, TIMEOUT).await;
    assert_eq!(
        normal_reasons(&env, &pooled).await,
        ["ResourceCreated", "ClaimDeleted"]
    );

    env.teardown([operator]).await;
}

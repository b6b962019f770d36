//! What users and operators see, on the real control plane: the Normal Events of a
//! claim's life, in order, as `kubectl describe` shows them; the metrics a pool is run with,
//! scraped from `/metrics`; and a status that does not flip between two brokers.

mod support;

use std::time::Duration;

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
    env.events_about(regarding)
        .await
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Normal"))
        .filter_map(|e| e.reason)
        .collect()
}

/// Pool `name`, keeping one handle of one `config` ConfigMap ready.
async fn create_pool_of_one(env: &TestEnv, name: &str) {
    let pool: ResourcePool = from_json(json!({
        "apiVersion": format!("{D}/v1"), "kind": "ResourcePool",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": 1,
            "resources": objects::resources(
                &env.namespace,
                &[("config", "config", template(json!({})))],
            ),
        },
    }));
    env.create(&pool).await;
}

/// A pooled bind: the claim says it was bound from the pool, then that it is ready; the
/// pool's handle tells the create of its ConfigMap by its status, not by an Event; once the
/// claim is deleted, its handle says why it goes.
#[tokio::test]
async fn a_pooled_bind_tells_its_milestones_in_order() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    create_config_provider(&env, true).await;
    create_pool_of_one(&env, "events").await;
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
    assert_eq!(normal_reasons(&env, &pooled).await, Vec::<String>::new());

    apis.claims
        .delete("eventful", &DeleteParams::default())
        .await
        .expect("deleting the claim");
    gone(&apis.handles, &pooled, TIMEOUT).await;
    // The claim's finalizer says it; a handle reconcile that raced it may say it again.
    let mut reasons = normal_reasons(&env, &pooled).await;
    reasons.dedup();
    assert_eq!(reasons, ["ClaimDeleted"]);

    env.teardown([operator]).await;
}

/// Deleting claims deletes their handles: each handle says why it goes (`ClaimDeleted`), and
/// no claim hears that its handle's deletion deletes it (`HandleDeleted`), which would put the
/// cause backwards. The handles' finalizers often run while their claims still wait for their
/// own, so several claims make that window likely.
#[tokio::test]
async fn a_claims_deletion_is_not_told_as_its_handles() {
    const CLAIMS: usize = 6;
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    create_config_provider(&env, true).await;
    let operator = TestOperator::start(env.kube_config(), &ns);
    let names: Vec<String> = (0..CLAIMS).map(|i| format!("gone{i}")).collect();
    for name in &names {
        create_config_claim(&env, name, json!({}), json!({}), json!({})).await;
    }
    let apis = Apis::new(&env);
    let mut handles = Vec::new();
    for name in &names {
        handles.push(apis.bound(name).await.1.metadata.name.unwrap_or_default());
    }
    apis.claims
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("deleting the claims");
    for handle in &handles {
        gone(&apis.handles, handle, TIMEOUT).await;
    }
    for name in &names {
        gone(&apis.claims, name, TIMEOUT).await;
    }
    for (name, handle) in names.iter().zip(&handles) {
        let mut reasons = normal_reasons(&env, handle).await;
        reasons.dedup();
        assert_eq!(reasons.last().map(String::as_str), Some("ClaimDeleted"));
        let told = normal_reasons(&env, name).await;
        assert!(
            !told.iter().any(|reason| reason == "HandleDeleted"),
            "claim {name} was told its handle's deletion deletes it: {told:?}"
        );
    }

    env.teardown([operator]).await;
}

/// A warm bind of a handle whose resources are ready already: one `Bound` Event that says so,
/// no `Ready` Event after it.
#[tokio::test]
async fn a_warm_bind_of_a_ready_handle_tells_it_once() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    create_config_provider(&env, false).await;
    create_pool_of_one(&env, "ready").await;
    let operator = TestOperator::start(env.kube_config(), &ns);
    let apis = Apis::new(&env);
    let pooled = eventually("the pool's handle, ready", TIMEOUT, || async {
        let handles = env.handles_of_pool("ready").await;
        let handle = handles.first()?;
        let ready = handle.status.as_ref().and_then(|s| s.ready) == Some(true);
        ready.then(|| handle.metadata.name.clone()).flatten()
    })
    .await;

    create_config_claim(&env, "at-once", json!({}), json!({}), json!({})).await;
    let (_, handle) = apis.bound("at-once").await;
    assert_eq!(handle.metadata.name.as_deref(), Some(pooled.as_str()));
    let bound = env
        .event("at-once", "Normal", "Bound", Duration::from_secs(5))
        .await;
    assert_eq!(
        bound.note.as_deref(),
        Some(
            format!(
                "bound to ResourceHandle {pooled} from ResourcePool ready; \
                 the resources of ResourceHandle {pooled} are ready"
            )
            .as_str()
        )
    );
    // Anything else about the claim would have been published by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(normal_reasons(&env, "at-once").await, ["Bound"]);

    env.teardown([operator]).await;
}

/// The value of the sample `line_start` (metric name and labels, as exposed).
fn sample(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(line_start))
        .and_then(|value| value.trim().parse().ok())
}

/// A pool of two fills; one claim binds warm (from the pool), one cold (it asks for another
/// pool): the scrape shows the pool's gauges, the handles created by reason, both bind
/// latencies, the reconciles of every controller, build and process figures.
#[tokio::test]
async fn a_scrape_shows_pools_binds_and_reconciles() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    create_config_provider(&env, false).await;
    let pool: ResourcePool = from_json(json!({
        "apiVersion": format!("{D}/v1"), "kind": "ResourcePool",
        "metadata": {"name": "scraped"},
        "spec": {
            "minAvailable": 2,
            "resources": objects::resources(&ns, &[("config", "config", template(json!({})))]),
        },
    }));
    env.create(&pool).await;
    let address = support::http::free_address();
    let operator = TestOperator::start_with(env.kube_config(), &ns, Some(address), "scraped");
    let apis = Apis::new(&env);
    eventually("the pool full and ready", TIMEOUT, || async {
        let handles = env.handles_of_pool("scraped").await;
        (handles.len() == 2
            && handles
                .iter()
                .all(|h| h.status.as_ref().and_then(|s| s.ready) == Some(true)))
        .then_some(())
    })
    .await;
    create_config_claim(&env, "warm", json!({}), json!({}), json!({})).await;
    apis.bound("warm").await;
    // Asking for another pool: no pool handle fits, one is created for it.
    let elsewhere = json!({"annotations": {objects::key("resource-pool-name"): "elsewhere"}});
    create_config_claim(&env, "cold", elsewhere, json!({}), json!({})).await;
    apis.bound("cold").await;
    // Its Bound Event says why no handle fitted.
    let why = env
        .event("cold", "Normal", "Bound", TIMEOUT)
        .await
        .note
        .unwrap_or_default();
    assert!(
        why.contains("created for the claim because no unbound ResourceHandle fits: ")
            && why.contains("(pool scraped): of another pool than the claim asks for"),
        "{why}"
    );

    let pool_labels = format!("{{name=\"scraped\",namespace=\"{ns}\"}}");
    let text = eventually("the pool refilled, in the scrape", TIMEOUT, || async {
        let (_, text) = support::http::get(address, "/metrics").await;
        let full = sample(
            &text,
            &format!("poolboy_resource_pool_available{pool_labels}"),
        ) == Some(2.0)
            && sample(&text, &format!("poolboy_resource_pool_taken{pool_labels}")) == Some(1.0);
        full.then_some(text)
    })
    .await;
    for (line, value) in [
        (
            format!("poolboy_resource_pool_min_available{pool_labels}"),
            2.0,
        ),
        (
            "poolboy_resource_handles_created_total{reason=\"pool\"}".to_owned(),
            3.0,
        ),
        (
            "poolboy_resource_handles_created_total{reason=\"claim\"}".to_owned(),
            1.0,
        ),
        (
            "poolboy_claim_bind_seconds_count{source=\"warm\"}".to_owned(),
            1.0,
        ),
        (
            "poolboy_claim_bind_seconds_count{source=\"cold\"}".to_owned(),
            1.0,
        ),
    ] {
        assert_eq!(sample(&text, &line), Some(value), "{line} in:\n{text}");
    }
    for controller in ["ResourceClaim", "ResourceHandle", "ResourcePool"] {
        let reconciles = format!(
            "poolboy_reconcile_duration_seconds_count{{controller=\"{controller}\",result=\"success\"}}"
        );
        assert!(
            sample(&text, &reconciles).is_some_and(|n| n >= 1.0),
            "{reconciles} in:\n{text}"
        );
    }
    assert!(text.contains("poolboy_build_info{version="), "{text}");
    assert!(
        sample(&text, "process_resident_memory_bytes").is_some_and(|b| b > 0.0),
        "{text}"
    );
    // No claim name is a label.
    assert!(
        !text.contains("name=\"warm\"") && !text.contains("name=\"cold\""),
        "{text}"
    );

    env.teardown([operator]).await;
}

/// The resourceVersions of every claim and handle of the namespace, by kind and name.
async fn versions(env: &TestEnv) -> Vec<(String, String)> {
    let apis = Apis::new(env);
    let claims = apis
        .claims
        .list(&ListParams::default())
        .await
        .expect("claims");
    let handles = apis
        .handles
        .list(&ListParams::default())
        .await
        .expect("handles");
    let mut versions: Vec<(String, String)> = claims
        .items
        .iter()
        .map(|c| (&c.metadata, "claim"))
        .chain(handles.items.iter().map(|h| (&h.metadata, "handle")))
        .map(|(m, kind)| {
            (
                format!("{kind}/{}", m.name.as_deref().unwrap_or_default()),
                m.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect();
    versions.sort();
    versions
}

/// A managed resource's state carries its apiVersion and kind however the
/// cached copy arrived. One broker saw the ConfigMaps made (WATCH events carry the kind), a
/// second started later and listed them (LIST items do not), and was then restarted: the
/// claims' state keeps `kind: ConfigMap`, and once quiet neither broker writes anything
/// (before, the two rewrote each claim's status many times a second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_brokers_and_a_restart_agree_on_the_state_and_fall_quiet() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let first = TestOperator::start_with(env.kube_config(), &env.namespace, None, "first");
    let apis = Apis::new(&env);
    for name in ["one", "two", "three"] {
        create_config_claim(&env, name, json!({}), json!({}), json!({})).await;
    }
    for name in ["one", "two", "three"] {
        apis.bound(name).await;
    }
    let second = TestOperator::start_with(env.kube_config(), &env.namespace, None, "second");
    tokio::time::sleep(Duration::from_secs(2)).await;
    second.stop().await;
    let second = TestOperator::start_with(env.kube_config(), &env.namespace, None, "second");

    let kinds = eventually("every claim's state with its kind", TIMEOUT, || async {
        let claims = apis.claims.list(&ListParams::default()).await.ok()?;
        let kinds: Vec<String> = claims
            .items
            .iter()
            .filter_map(|c| {
                let status = serde_json::to_value(c.status.as_ref()?).ok()?;
                status["resources"][0]["state"]["kind"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        (kinds.len() == 3).then_some(kinds)
    })
    .await;
    assert_eq!(kinds, ["ConfigMap", "ConfigMap", "ConfigMap"]);
    // Quiet: what the brokers had to do after the restart is done (two samples 2 s apart
    // agree; two brokers that disagree never get there), and then nothing changes.
    let before = eventually("the brokers quiet", Duration::from_secs(60), || async {
        let first = versions(&env).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        (versions(&env).await == first).then_some(first)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(versions(&env).await, before, "no status writes once quiet");

    env.teardown([first, second]).await;
}

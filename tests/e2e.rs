//! The whole broker on the real control plane: claims, handles, pools and managed ConfigMaps
//! together, as a user sees them. Every assertion awaits a state with a
//! timeout; nothing sleeps and hopes.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use poolboy::api::OperatorDomain;
use poolboy::api::kinds::{ClaimObject, HandleObject, Kinds, PoolObject};
use serde_json::{Value, json};
use support::apis::bound;
use support::objects::{self, merged, resource_name};
use support::operator::TestOperator;
use support::{TestEnv, gone, wait_for};

const WAIT: Duration = Duration::from_secs(60);

fn kinds() -> Kinds {
    Kinds::new(&OperatorDomain::default())
}

fn dynamic(env: &TestEnv, resource: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(env.client.clone(), &env.namespace, resource)
}

fn claims(env: &TestEnv) -> Api<ClaimObject> {
    Api::namespaced_with(env.client.clone(), &env.namespace, &kinds().claim)
}

fn handle_objects(env: &TestEnv) -> Api<HandleObject> {
    Api::namespaced_with(env.client.clone(), &env.namespace, &kinds().handle)
}

fn pools(env: &TestEnv) -> Api<PoolObject> {
    Api::namespaced_with(env.client.clone(), &env.namespace, &kinds().pool)
}

async fn create(env: &TestEnv, resource: &ApiResource, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).expect("a valid object");
    dynamic(env, resource)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating {resource:?}: {e}"));
}

/// A provider of ConfigMaps in the test namespace, matched by the label `e2e/kind: <name>`,
/// with `extra` merged into its spec.
fn labelled_provider(env: &TestEnv, name: &str, extra: Value) -> Value {
    let spec = json!({
        "match": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"e2e/kind": name}}},
        "matchIgnore": ["/data(/.*)?"],
        "readinessCheck": "metadata.uid is defined",
        "updateFilters": [{"pathMatch": "/data/.*"}],
    });
    json!(objects::configmap_provider(
        &env.namespace,
        name,
        merged(spec, extra)
    ))
}

fn claim(env: &TestEnv, name: &str, provider_label: &str, data: Value) -> Value {
    json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": env.namespace},
        "spec": {"resources": [{
            "name": "config",
            "template": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"labels": {"e2e/kind": provider_label}},
                "data": data,
            },
        }]},
    })
}

async fn claim_status(
    env: &TestEnv,
    claim: &str,
    what: &str,
    test: impl Fn(&Value) -> bool,
) -> Value {
    let status = |claim: &ClaimObject| {
        let status = claim.status.as_ref()?;
        serde_json::to_value(status).ok()
    };
    let claim = wait_for(&claims(env), claim, what, WAIT, |c| {
        status(c).is_some_and(|s| test(&s))
    })
    .await;
    status(&claim).unwrap_or_default()
}

#[tokio::test]
async fn an_explicit_provider_claim_creates_its_resource_syncs_status_and_cascades_on_delete() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let k = kinds();
    create(
        &env,
        &k.provider,
        labelled_provider(&env, "config", json!({})),
    )
    .await;
    let mut claim_object = claim(&env, "explicit", "other", json!({"color": "blue"}));
    claim_object["spec"]["resources"][0]["provider"] = json!({"name": "config"});
    create(&env, &k.claim, claim_object).await;

    let handle = bound(&env, "explicit").await;
    let configmaps: Api<ConfigMap> = env.api();
    let name = resource_name(&handle, 0);
    let configmap = wait_for(&configmaps, &name, "exists", WAIT, |_| true).await;
    let annotations = configmap.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations["poolboy.gpte.redhat.com/resource-handle-name"],
        handle
    );
    assert_eq!(
        annotations["poolboy.gpte.redhat.com/resource-claim-name"],
        "explicit"
    );
    assert_eq!(configmap.data.unwrap_or_default()["color"], "blue");

    let status = claim_status(&env, "explicit", "ready with state", |s| {
        s["ready"] == json!(true) && s["resources"][0]["state"]["data"]["color"] == json!("blue")
    })
    .await;
    assert_eq!(status["resources"][0]["reference"]["name"], json!(name));
    assert!(
        status["resources"][0]["state"]["metadata"]["annotations"].is_null(),
        "Poolboy's annotations are pruned from the state (Δ§3.1.3)"
    );

    claims(&env)
        .delete("explicit", &DeleteParams::default())
        .await
        .expect("delete claim");
    gone(&handle_objects(&env), &handle, WAIT).await;
    gone(&configmaps, &name, WAIT).await;
    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_match_claim_gets_the_provider_defaults() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let k = kinds();
    let extra = json!({"default": {"data": {"owner": "nobody", "color": "grey"}}});
    create(
        &env,
        &k.provider,
        labelled_provider(&env, "defaults", extra),
    )
    .await;
    create(
        &env,
        &k.claim,
        claim(&env, "matched", "defaults", json!({"color": "green"})),
    )
    .await;

    let handle = bound(&env, "matched").await;
    let claim = claims(&env).get("matched").await.expect("claim");
    let template = &claim.spec.resources.as_ref().expect("resources")[0].template;
    let data = &template.as_ref().expect("template")["data"];
    assert_eq!(
        data["owner"], "nobody",
        "a default fills what the claim left out"
    );
    assert_eq!(
        data["color"], "green",
        "a default never overwrites the claim"
    );
    let annotations = claim.metadata.annotations.unwrap_or_default();
    assert!(annotations.contains_key("poolboy.gpte.redhat.com/resource-claim-init-timestamp"));
    let configmaps: Api<ConfigMap> = env.api();
    let name = resource_name(&handle, 0);
    support::eventually("the ConfigMap has the defaults", WAIT, || {
        let configmaps = configmaps.clone();
        let name = name.clone();
        async move {
            let data = configmaps.get_opt(&name).await.ok()??.data?;
            (data.get("owner").map(String::as_str) == Some("nobody")).then_some(())
        }
    })
    .await;
    env.teardown([operator]).await;
}

#[tokio::test]
async fn an_invalid_claim_gets_a_clear_message_and_does_not_disturb_others() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let k = kinds();
    let extra = json!({"validation": {"checks": [{"name": "color is known", "check": "data.color in ['red', 'blue']"}]}});
    create(&env, &k.provider, labelled_provider(&env, "checked", extra)).await;
    create(
        &env,
        &k.claim,
        claim(&env, "bad", "checked", json!({"color": "purple"})),
    )
    .await;
    create(
        &env,
        &k.claim,
        claim(&env, "good", "checked", json!({"color": "red"})),
    )
    .await;

    let status = claim_status(&env, "bad", "a validation error", |s| {
        s["resources"][0]["validationError"].is_string()
    })
    .await;
    assert_eq!(
        status["resources"][0]["validationError"],
        "Validation check failed: color is known"
    );
    assert!(
        status["resourceHandle"].is_null(),
        "an invalid claim is not bound"
    );
    bound(&env, "good").await;
    env.teardown([operator]).await;
}

fn pool(env: &TestEnv, name: &str, provider: &str, min_available: i64) -> Value {
    json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourcePool",
        "metadata": {"name": name, "namespace": env.namespace},
        "spec": {
            "minAvailable": min_available,
            "resources": [{
                "provider": {
                    "apiVersion": "poolboy.gpte.redhat.com/v1",
                    "kind": "ResourceProvider",
                    "name": provider,
                    "namespace": env.namespace,
                },
                "template": {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"labels": {"e2e/kind": provider}},
                },
            }],
        },
    })
}

async fn unbound_pool_handles(env: &TestEnv, pool: &str) -> Vec<HandleObject> {
    let selector = format!("poolboy.gpte.redhat.com/resource-pool-name={pool}");
    let list = handle_objects(env)
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("list handles");
    list.items
        .into_iter()
        .filter(|h| h.spec.resource_claim.is_none() && h.metadata.deletion_timestamp.is_none())
        .collect()
}

async fn pool_has_unbound(env: &TestEnv, pool: &str, count: usize) {
    support::eventually(
        &format!("pool {pool} has {count} unbound handles"),
        WAIT * 3,
        || async { (unbound_pool_handles(env, pool).await.len() == count).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn a_pool_fills_binds_refills_and_is_deleted_cleanly() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let k = kinds();
    create(
        &env,
        &k.provider,
        labelled_provider(&env, "pooled", json!({})),
    )
    .await;
    create(&env, &k.pool, pool(&env, "pool", "pooled", 2)).await;
    pool_has_unbound(&env, "pool", 2).await;
    let before: BTreeSet<String> = unbound_pool_handles(&env, "pool")
        .await
        .into_iter()
        .filter_map(|h| h.metadata.name)
        .collect();

    create(
        &env,
        &k.claim,
        claim(&env, "from-pool", "pooled", json!({"color": "red"})),
    )
    .await;
    let handle = bound(&env, "from-pool").await;
    assert!(before.contains(&handle), "the claim binds a pooled handle");
    pool_has_unbound(&env, "pool", 2).await;

    pools(&env)
        .delete("pool", &DeleteParams::default())
        .await
        .expect("delete pool");
    gone(&pools(&env), "pool", WAIT).await;
    pool_has_unbound(&env, "pool", 0).await;
    let bound = handle_objects(&env)
        .get(&handle)
        .await
        .expect("the bound handle stays");
    assert!(bound.spec.resource_claim.is_some());
    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_lifespan_end_deletes_claim_handle_and_resource() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let k = kinds();
    let extra = json!({"lifespan": {"default": "8s"}});
    create(&env, &k.provider, labelled_provider(&env, "short", extra)).await;
    create(
        &env,
        &k.claim,
        claim(&env, "short-lived", "short", json!({})),
    )
    .await;
    let handle = bound(&env, "short-lived").await;
    let configmaps: Api<ConfigMap> = env.api();
    let name = resource_name(&handle, 0);
    wait_for(&configmaps, &name, "exists", WAIT, |_| true).await;
    gone(&claims(&env), "short-lived", WAIT).await;
    gone(&handle_objects(&env), &handle, WAIT).await;
    gone(&configmaps, &name, WAIT).await;
    env.teardown([operator]).await;
}

#[tokio::test]
async fn an_update_filter_lets_one_field_through_and_blocks_another() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let k = kinds();
    let extra = json!({"updateFilters": [{"pathMatch": "/data/allowed"}]});
    create(
        &env,
        &k.provider,
        labelled_provider(&env, "filtered", extra),
    )
    .await;
    let data = json!({"allowed": "1", "blocked": "1"});
    create(&env, &k.claim, claim(&env, "edited", "filtered", data)).await;
    let handle = bound(&env, "edited").await;
    let configmaps: Api<ConfigMap> = env.api();
    let name = resource_name(&handle, 0);
    wait_for(&configmaps, &name, "exists", WAIT, |_| true).await;

    let edit = json!({"spec": {"resources": [{
        "name": "config",
        "template": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"labels": {"e2e/kind": "filtered"}},
            "data": {"allowed": "2", "blocked": "2"},
        },
    }]}});
    claims(&env)
        .patch("edited", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .expect("edit the claim");
    let data = support::eventually("the allowed field reaches the ConfigMap", WAIT, || {
        let configmaps = configmaps.clone();
        let name = name.clone();
        async move {
            let data = configmaps.get_opt(&name).await.ok()??.data?;
            (data.get("allowed").map(String::as_str) == Some("2")).then_some(data)
        }
    })
    .await;
    assert_eq!(
        data["blocked"], "1",
        "the filter keeps the blocked field as it was"
    );
    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_change_to_a_managed_configmap_shows_in_the_claim_status() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let k = kinds();
    create(
        &env,
        &k.provider,
        labelled_provider(&env, "watched", json!({})),
    )
    .await;
    create(
        &env,
        &k.claim,
        claim(&env, "watching", "watched", json!({"phase": "new"})),
    )
    .await;
    let handle = bound(&env, "watching").await;
    claim_status(&env, "watching", "the first state", |s| {
        s["resources"][0]["state"]["data"]["phase"] == json!("new")
    })
    .await;
    // A change the broker does not own (the provider's update filters cover `/data` only, so a
    // data change would be put back): someone labels the ConfigMap.
    let configmaps: Api<ConfigMap> = env.api();
    let change = json!({"metadata": {"labels": {"e2e/observed": "yes"}}});
    configmaps
        .patch(
            &resource_name(&handle, 0),
            &PatchParams::default(),
            &Patch::Merge(&change),
        )
        .await
        .expect("change the ConfigMap");
    let started = std::time::Instant::now();
    claim_status(&env, "watching", "the changed state", |s| {
        s["resources"][0]["state"]["metadata"]["labels"]["e2e/observed"] == json!("yes")
    })
    .await;
    eprintln!(
        "ConfigMap change reached the claim status in {:?}",
        started.elapsed()
    );
    env.teardown([operator]).await;
}

/// 200 claims against a pool of 100 ready handles, two operator processes, no leader
/// election: no handle is bound twice and every claim ends bound, from the pool or on fresh
/// handles. A pool handle bound by a process that then lost the claim to the other is
/// released and deleted: every pool handle is bound or gone, none left unbound.
#[tokio::test]
async fn two_hundred_claims_two_operators_one_pool_of_a_hundred() {
    let env = TestEnv::new().await;
    let first = TestOperator::start_with(env.kube_config(), &env.namespace, None, "first");
    let k = kinds();
    create(
        &env,
        &k.provider,
        labelled_provider(&env, "race", json!({})),
    )
    .await;
    create(&env, &k.pool, pool(&env, "race", "race", 100)).await;
    pool_has_unbound(&env, "race", 100).await;
    let pooled: BTreeSet<String> = unbound_pool_handles(&env, "race")
        .await
        .into_iter()
        .filter_map(|h| h.metadata.name)
        .collect();
    // No refills from here on: the second hundred claims must get fresh handles.
    let stop_refills = json!({"spec": {"minAvailable": 0}});
    pools(&env)
        .patch(
            "race",
            &PatchParams::default(),
            &Patch::Merge(&stop_refills),
        )
        .await
        .expect("stop refills");
    let second = TestOperator::start_with(env.kube_config(), &env.namespace, None, "second");

    let names: Vec<String> = (0..200).map(|i| format!("race-{i:03}")).collect();
    let creates = futures::stream::iter(names.clone())
        .map(|name| {
            let env = &env;
            let claim = claim(env, &name, "race", json!({"n": name}));
            async move { create(env, &kinds().claim, claim).await }
        })
        .buffer_unordered(20);
    creates.collect::<Vec<()>>().await;

    let bound: BTreeMap<String, String> =
        support::eventually("all 200 claims bound", WAIT * 5, || async {
            let list = claims(&env).list(&ListParams::default()).await.ok()?;
            let bound: BTreeMap<String, String> = list
                .items
                .into_iter()
                .filter_map(|c| {
                    let handle = c.status?.resource_handle?.name;
                    Some((c.metadata.name?, handle))
                })
                .collect();
            (bound.len() == 200).then_some(bound)
        })
        .await;
    let distinct: BTreeSet<&String> = bound.values().collect();
    assert_eq!(distinct.len(), 200, "no handle is bound to two claims");
    let from_pool = bound.values().filter(|h| pooled.contains(*h)).count();
    assert!(
        from_pool >= 50,
        "most of the pool's hundred handles are used, few lost to races: {from_pool}"
    );
    // A handle bound by the process that lost the claim is released within moments, and a
    // released pool handle deleted; any that stays bound beside the recorded one is a double
    // bind.
    let settled = "every pool handle bound or gone, and each claim bound to one handle";
    let handles_of_claims = support::eventually(settled, WAIT * 3, || async {
        let all = handle_objects(&env)
            .list(&ListParams::default())
            .await
            .ok()?;
        let left = all
            .items
            .iter()
            .filter(|h| h.metadata.name.as_ref().is_some_and(|n| pooled.contains(n)))
            .filter(|h| h.metadata.deletion_timestamp.is_none())
            .count();
        let mut handles_of_claims: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for handle in all.items {
            if let (Some(claim), Some(name)) = (handle.spec.resource_claim, handle.metadata.name) {
                handles_of_claims.entry(claim.name).or_default().push(name);
            }
        }
        let single = handles_of_claims.values().all(|handles| handles.len() == 1);
        (left == from_pool && single).then_some(handles_of_claims)
    })
    .await;
    for (claim, handle) in &bound {
        assert_eq!(
            handles_of_claims.get(claim),
            Some(&vec![handle.clone()]),
            "claim {claim} records the handle bound to it"
        );
    }
    env.teardown([second, first]).await;
}

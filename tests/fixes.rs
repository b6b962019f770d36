//! The race and status fixes of Poolboy 1.13–1.17 (Δ§8, B01–B23) that are about the cluster,
//! one test each, plus preferenceScore ordering (B05), the lifespan start gate (B19),
//! resourceLabels/resourceAnnotations reaching resources (Δ§2.4–2.5) and the ignore label on
//! claims with restores from a backup (§7.6). The whole operator runs; ConfigMaps are the
//! managed kind. `docs/fixes.md` maps every B item to its tests.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Resource, ResourceExt};
use poolboy::api::{ResourceClaim, ResourceHandle};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use support::objects::{self, D, key, resource_name};
use support::operator::TestOperator;
use support::{TestEnv, eventually, from_json, gone, wait_for};

const TIMEOUT: Duration = Duration::from_secs(40);
/// The label the providers of this file match claim templates by.
const KIND_LABEL: &str = "fixes.poolboy.test/kind";

fn timestamp(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A ConfigMap template the providers of this file match, with `data`.
fn template(data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"labels": {KIND_LABEL: "config"}},
        "data": data,
    })
}

/// `config`: the provider of ConfigMaps in the test namespace, matched by [`KIND_LABEL`],
/// `data` ignored for matching and let through by its update filter. Ready once the
/// ConfigMap is labelled `ready: yes` when `gated`, else as soon as it exists.
async fn create_provider(env: &TestEnv, gated: bool) {
    let readiness = match gated {
        true => "metadata.labels.ready | default('no') == 'yes'",
        false => "metadata.uid is defined",
    };
    let spec = json!({
        "match": {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"labels": {KIND_LABEL: "config"}}},
        "matchIgnore": ["/data(/.*)?"],
        "override": {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"namespace": env.namespace}},
        "updateFilters": [{"pathMatch": "/data/.*"}],
        "readinessCheck": readiness,
    });
    env.create(&objects::provider("config", spec)).await;
}

/// `spec.resources` of a handle: one `config` resource per `(name, data)`.
fn handle_resources(env: &TestEnv, entries: &[(&str, Value)]) -> Value {
    let entries: Vec<Value> = entries
        .iter()
        .map(|(name, data)| {
            json!({"name": name, "provider": objects::provider_ref("config", &env.namespace), "template": template(data.clone())})
        })
        .collect();
    json!(entries)
}

/// Creates handle `name` with `metadata` and `spec` (apiVersion, kind, namespace added).
async fn create_handle(env: &TestEnv, name: &str, metadata: Value, spec: Value) -> ResourceHandle {
    let mut metadata = metadata;
    metadata["name"] = json!(name);
    env.create(&objects::handle(metadata, spec)).await
}

/// A resources claim with one `config` resource named `config`, with `metadata` merged in.
async fn create_claim(env: &TestEnv, name: &str, metadata: Value, spec_extra: Value, data: Value) {
    let mut claim = json!({
        "apiVersion": format!("{D}/v1"), "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": {"resources": [{"name": "config", "template": template(data)}]},
    });
    claim["metadata"]["name"] = json!(name);
    if let (Some(spec), Some(extra)) = (claim["spec"].as_object_mut(), spec_extra.as_object()) {
        spec.extend(extra.clone());
    }
    env.create::<ResourceClaim>(&from_json(claim)).await;
}

/// A handle name of this test: `guid-<what>-<random>` (its ConfigMaps: `guid<i>-…`).
fn handle_name(what: &str) -> String {
    format!("guid-{what}-{}", support::random_suffix())
}

async fn json_of<K>(api: &Api<K>, name: &str) -> Option<Value>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + serde::Serialize,
{
    let object = api.get_opt(name).await.expect("reading an object")?;
    serde_json::to_value(object).ok()
}

/// Waits until `name` of `api` satisfies `check`, and returns it as JSON.
async fn await_object<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + serde::Serialize,
{
    let object = wait_for(api, name, what, TIMEOUT, |o| {
        serde_json::to_value(o).is_ok_and(|o| check(&o))
    })
    .await;
    serde_json::to_value(object).expect("an object serialises")
}

/// The handle claim `name` is bound to, once its status says so.
async fn bound(env: &TestEnv, claim: &str) -> String {
    let claim = await_object(&env.api::<ResourceClaim>(), claim, "bound", |c| {
        c["status"]["resourceHandle"]["name"].is_string()
    })
    .await;
    claim["status"]["resourceHandle"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Waits until handle `name` reports every resource referenced and the handle ready.
async fn ready_handle(env: &TestEnv, name: &str) -> Value {
    await_object(&env.api::<ResourceHandle>(), name, "ready", |h| {
        let resources = h["status"]["resources"].as_array();
        h["status"]["ready"] == true
            && resources.is_some_and(|r| r.iter().all(|r| r["reference"]["name"].is_string()))
    })
    .await
}

async fn configmap(env: &TestEnv, name: &str) -> Option<ConfigMap> {
    env.api::<ConfigMap>()
        .get_opt(name)
        .await
        .expect("reading a ConfigMap")
}

async fn handles(env: &TestEnv) -> Vec<ResourceHandle> {
    env.api::<ResourceHandle>()
        .list(&ListParams::default())
        .await
        .expect("listing handles")
        .items
}

/// The handles bound to claim `claim`.
async fn handles_of_claim(env: &TestEnv, claim: &str) -> Vec<String> {
    handles(env)
        .await
        .into_iter()
        .filter(|h| {
            h.spec
                .resource_claim
                .as_ref()
                .is_some_and(|r| r.name == claim)
        })
        .map(|h| h.name_any())
        .collect()
}

/// The ConfigMaps that say they belong to handle `handle`.
async fn configmaps_of(env: &TestEnv, handle: &str) -> BTreeSet<String> {
    let configmaps = env.configmaps_of_handle(handle).await;
    configmaps.iter().map(ResourceExt::name_any).collect()
}

async fn merge<K>(api: &Api<K>, name: &str, patch: Value)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching {name}: {e}"));
}

async fn set_ignored<K>(api: &Api<K>, name: &str, ignored: bool)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let value = if ignored { json!("") } else { Value::Null };
    merge(
        api,
        name,
        json!({"metadata": {"labels": {key("ignore"): value}}}),
    )
    .await;
}

/// Waits until the server's clock (as seen in a new object's creationTimestamp) has moved
/// past `after`: creation timestamps have a resolution of one second, and age ordering needs
/// two handles a second apart.
async fn a_second_after(after: DateTime<Utc>) {
    eventually("a second to pass", TIMEOUT, || async {
        (Utc::now() > after + TimeDelta::milliseconds(1100)).then_some(())
    })
    .await;
}

fn created(handle: &Value) -> DateTime<Utc> {
    let text = handle["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or_default();
    DateTime::parse_from_rfc3339(text)
        .expect("a creationTimestamp")
        .with_timezone(&Utc)
}

/// Every ConfigMap name the test namespace ever showed, from a watch started (and listed)
/// before the call returns.
async fn record_configmaps(env: &TestEnv) -> Arc<Mutex<BTreeSet<String>>> {
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let listed = Arc::new(AtomicBool::new(false));
    let api: Api<ConfigMap> = env.api();
    let (record, done) = (seen.clone(), listed.clone());
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Apply(cm)) | Ok(Event::InitApply(cm)) => {
                    if let Ok(mut seen) = record.lock() {
                        seen.insert(cm.name_any());
                    }
                }
                Ok(Event::InitDone) => done.store(true, Ordering::SeqCst),
                _ => {}
            }
        }
    });
    eventually("the ConfigMap watch listed", TIMEOUT, || async {
        listed.load(Ordering::SeqCst).then_some(())
    })
    .await;
    seen
}

/// Every version of object `name` from now on, as JSON, from a watch started (and listed)
/// before the call returns.
async fn record_versions<K>(env: &TestEnv, name: &str) -> Arc<Mutex<Vec<Value>>>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + serde::Serialize
        + Send
        + 'static,
    <K as Resource>::DynamicType: Default,
{
    let seen = Arc::new(Mutex::new(Vec::new()));
    let listed = Arc::new(AtomicBool::new(false));
    let api: Api<K> = env.api();
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let (record, done) = (seen.clone(), listed.clone());
    tokio::spawn(async move {
        let mut stream = watcher(api, config).boxed();
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Apply(object)) => {
                    if let (Ok(mut seen), Ok(value)) = (record.lock(), serde_json::to_value(object))
                    {
                        seen.push(value);
                    }
                }
                Ok(Event::InitDone) => done.store(true, Ordering::SeqCst),
                _ => {}
            }
        }
    });
    eventually("the watch listed", TIMEOUT, || async {
        listed.load(Ordering::SeqCst).then_some(())
    })
    .await;
    seen
}

/// Δ B04 (#152): a handle whose `spec.lifespan.end` is under 120 s away is never bound, even
/// when it is the oldest match; the claim gets the other one.
#[tokio::test]
async fn b04_handle_near_lifespan_end_is_not_bound() {
    let env = TestEnv::new().await;
    create_provider(&env, false).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let end = timestamp(Utc::now() + TimeDelta::seconds(100));
    let near = handle_name("near");
    create_handle(
        &env,
        &near,
        json!({}),
        json!({"lifespan": {"end": end}, "resources": handle_resources(&env, &[("config", json!({}))])}),
    )
    .await;
    let near_status = ready_handle(&env, &near).await;
    a_second_after(created(&near_status)).await;
    let far = handle_name("far");
    create_handle(
        &env,
        &far,
        json!({}),
        json!({"resources": handle_resources(&env, &[("config", json!({}))])}),
    )
    .await;
    let far_status = ready_handle(&env, &far).await;
    assert!(
        created(&near_status) < created(&far_status),
        "the near-end handle is older"
    );

    create_claim(&env, "claim", json!({}), json!({}), json!({"x": "1"})).await;
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
    create_provider(&env, false).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let spec = |score: f64| json!({"preferenceScore": score, "resources": handle_resources(&env, &[("config", json!({}))])});
    let old = handle_name("old");
    create_handle(&env, &old, json!({}), spec(0.0)).await;
    let old_status = ready_handle(&env, &old).await;
    a_second_after(created(&old_status)).await;
    let preferred = handle_name("preferred");
    create_handle(&env, &preferred, json!({}), spec(5.0)).await;
    let preferred_status = ready_handle(&env, &preferred).await;
    assert!(created(&old_status) < created(&preferred_status));

    create_claim(&env, "first", json!({}), json!({}), json!({})).await;
    assert_eq!(
        bound(&env, "first").await,
        preferred,
        "the higher score wins"
    );
    create_claim(&env, "second", json!({}), json!({}), json!({})).await;
    assert_eq!(bound(&env, "second").await, old, "then the remaining one");
    assert_eq!(handles(&env).await.len(), 2, "nothing created");

    env.teardown([operator]).await;
}

/// Δ B06 (#154): while other writers keep changing a bound claim (annotations, and template
/// edits that go on to the handle), its status still converges: it mirrors its handle's
/// readiness, every edit survives, the last template edit reaches the ConfigMap, and the claim
/// keeps its one handle.
#[tokio::test]
async fn b06_claim_status_converges_under_concurrent_edits() {
    let env = TestEnv::new().await;
    create_provider(&env, true).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    create_claim(&env, "busy", json!({}), json!({}), json!({"n": "0"})).await;
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
    create_provider(&env, false).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let name = handle_name("busy");
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
    create_handle(
        &env,
        &name,
        json!({}),
        json!({"resources": handle_resources(&env, &entries)}),
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
    create_provider(&env, false).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let name = handle_name("resized");
    let spec_of = |count: usize| {
        let entries: Vec<(String, Value)> = (0..count)
            .map(|i| (format!("r{i}"), json!({"i": i.to_string()})))
            .collect();
        let entries: Vec<(&str, Value)> = entries
            .iter()
            .map(|(n, d)| (n.as_str(), d.clone()))
            .collect();
        handle_resources(&env, &entries)
    };
    create_handle(&env, &name, json!({}), json!({"resources": spec_of(1)})).await;
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

/// Δ B10: a handle past its lifespan end, or whose claim is gone, deletes itself and does
/// nothing else in that pass: its resources are never created.
#[tokio::test]
async fn b10_an_expired_or_orphaned_handle_deletes_itself_without_creating_anything() {
    let env = TestEnv::new().await;
    create_provider(&env, false).await;
    let seen = record_configmaps(&env).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let resources = handle_resources(&env, &[("config", json!({}))]);
    let expired = handle_name("expired");
    let end = timestamp(Utc::now() - TimeDelta::seconds(30));
    create_handle(
        &env,
        &expired,
        json!({}),
        json!({"lifespan": {"end": end}, "resources": resources}),
    )
    .await;
    let orphan = handle_name("orphan");
    let spec = json!({"resourceClaim": objects::reference("ResourceClaim", "never-existed", &env.namespace), "resources": resources});
    create_handle(&env, &orphan, json!({}), spec).await;
    let handles_api: Api<ResourceHandle> = env.api();
    gone(&handles_api, &expired, TIMEOUT).await;
    gone(&handles_api, &orphan, TIMEOUT).await;

    // A ConfigMap of the test's own, once seen, proves the watch has caught up.
    let barrier: ConfigMap = from_json(json!({"metadata": {"name": "barrier"}}));
    env.create(&barrier).await;
    eventually("the watch sees the barrier", TIMEOUT, || async {
        seen.lock().ok()?.contains("barrier").then_some(())
    })
    .await;
    let seen = seen.lock().expect("the record").clone();
    for handle in [&expired, &orphan] {
        assert!(
            !seen.contains(&resource_name(handle, 0)),
            "{handle} created a resource: {seen:?}"
        );
    }

    env.teardown([operator]).await;
}

/// Δ B11: deletion works from `status.resources[].reference` and ignores a resource that is
/// already gone (404): the other resource is still deleted and the handle released.
#[tokio::test]
async fn b11_deleting_a_handle_whose_resource_is_already_gone_completes() {
    let env = TestEnv::new().await;
    create_provider(&env, false).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let name = handle_name("partial");
    let resources = handle_resources(&env, &[("a", json!({})), ("b", json!({}))]);
    create_handle(&env, &name, json!({}), json!({"resources": resources})).await;
    ready_handle(&env, &name).await;
    operator.stop().await;

    let configmaps: Api<ConfigMap> = env.api();
    configmaps
        .delete(&resource_name(&name, 0), &DeleteParams::default())
        .await
        .expect("deleting one resource behind the handle's back");
    let handles_api: Api<ResourceHandle> = env.api();
    handles_api
        .delete(&name, &DeleteParams::default())
        .await
        .expect("deleting the handle");
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    gone(&handles_api, &name, TIMEOUT).await;
    gone(&configmaps, &resource_name(&name, 1), TIMEOUT).await;
    assert!(
        configmap(&env, &resource_name(&name, 0)).await.is_none(),
        "not recreated"
    );

    env.teardown([operator]).await;
}

/// Δ B13: a resource that already exists under the name the handle generates is taken over
/// (patched through the update filters), not an error: the handle is valid and ready, and the
/// ConfigMap keeps its uid.
#[tokio::test]
async fn b13_an_existing_resource_is_taken_over_not_an_error() {
    let env = TestEnv::new().await;
    create_provider(&env, false).await;
    let name = handle_name("existing");
    let cm: ConfigMap = from_json(json!({
        "metadata": {"name": resource_name(&name, 0)},
        "data": {"v": "before"},
    }));
    let before = env.create(&cm).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    create_handle(
        &env,
        &name,
        json!({}),
        json!({"resources": handle_resources(&env, &[("config", json!({"v": "after"}))])}),
    )
    .await;
    let status = ready_handle(&env, &name).await;
    let valid = status["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Valid" && c["status"] == "True")
    });
    assert!(valid, "{status}");
    let cm = eventually("the ConfigMap takes the template", TIMEOUT, || async {
        let cm = configmap(&env, &resource_name(&name, 0)).await?;
        (cm.data.as_ref()?.get("v")? == "after").then_some(cm)
    })
    .await;
    assert_eq!(cm.uid(), before.uid(), "patched, not recreated");

    env.teardown([operator]).await;
}

/// Δ B14/B15 (#145): no shards here. The finalizer is the bare domain on claims and handles
/// (no shard index in it, no shard label anywhere), and objects carrying finalizers of other
/// Poolboy modes or versions (`D/handler`, `D/handler-<n>`, `D/resource-handler-<n>`) are
/// released on deletion all the same.
#[tokio::test]
async fn b15_finalizers_carry_no_shard_and_legacy_ones_are_released() {
    let env = TestEnv::new().await;
    create_provider(&env, false).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    create_claim(&env, "plain", json!({}), json!({}), json!({})).await;
    let handle = bound(&env, "plain").await;
    let claims: Api<ResourceClaim> = env.api();
    let handles_api: Api<ResourceHandle> = env.api();
    let claim = claims.get("plain").await.expect("claim");
    assert_eq!(claim.finalizers(), [D.to_owned()]);
    let bound_handle = handles_api.get(&handle).await.expect("handle");
    assert_eq!(bound_handle.finalizers(), [D.to_owned()]);
    for (kind, labels) in [("claim", claim.labels()), ("handle", bound_handle.labels())] {
        assert!(
            !labels.keys().any(|k| k.contains("shard")),
            "{kind} labels {labels:?}"
        );
    }

    // Legacy finalizers: the operator adds its own, and on deletion removes them all.
    let legacy = handle_name("legacy");
    let metadata = json!({"finalizers": [key("handler-2"), key("resource-handler-0")]});
    let resources = handle_resources(&env, &[("config", json!({}))]);
    create_handle(&env, &legacy, metadata, json!({"resources": resources})).await;
    await_object(&handles_api, &legacy, "managed", |h| {
        h["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.contains(&json!(D)))
    })
    .await;
    handles_api
        .delete(&legacy, &DeleteParams::default())
        .await
        .expect("delete");
    gone(&handles_api, &legacy, TIMEOUT).await;

    let metadata = json!({"finalizers": [key("handler")]});
    create_claim(&env, "legacy", metadata, json!({}), json!({})).await;
    let legacy_handle = bound(&env, "legacy").await;
    claims
        .delete("legacy", &DeleteParams::default())
        .await
        .expect("delete");
    gone(&claims, "legacy", TIMEOUT).await;
    gone(&handles_api, &legacy_handle, TIMEOUT).await;

    env.teardown([operator]).await;
}

/// Δ B19, acceptance (b): before `spec.lifespan.start` nothing happens to a claim (no handle
/// bound or created, no resource, no binding in its status); at its start it proceeds.
#[tokio::test]
async fn b19_a_claim_waits_for_its_lifespan_start() {
    let env = TestEnv::new().await;
    create_provider(&env, false).await;
    // An unbound matching handle is there all along: not even binding happens early.
    let spare = handle_name("spare");
    let resources = handle_resources(&env, &[("config", json!({}))]);
    create_handle(&env, &spare, json!({}), json!({"resources": resources})).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    ready_handle(&env, &spare).await;
    let start_text = timestamp(Utc::now() + TimeDelta::seconds(8));
    let start = DateTime::parse_from_rfc3339(&start_text)
        .expect("a timestamp")
        .with_timezone(&Utc);
    let spec = json!({"lifespan": {"start": start_text}});
    create_claim(&env, "later", json!({}), spec.clone(), json!({})).await;
    create_claim(&env, "later-too", json!({}), spec, json!({})).await;

    let claims: Api<ResourceClaim> = env.api();
    while Utc::now() < start - TimeDelta::milliseconds(1500) {
        for claim in ["later", "later-too"] {
            let claim = json_of(&claims, claim).await.expect("claim");
            assert!(
                claim["status"]["resourceHandle"].is_null(),
                "bound early: {claim}"
            );
        }
        let all = handles(&env).await;
        assert_eq!(all.len(), 1, "a handle was created early");
        assert!(
            all[0].spec.resource_claim.is_none(),
            "the spare handle was bound early"
        );
        assert_eq!(configmaps_of(&env, &spare).await.len(), 1);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let first = bound(&env, "later").await;
    let second = bound(&env, "later-too").await;
    assert!(
        first == spare || second == spare,
        "one of them takes the spare handle"
    );
    let created = if first == spare { second } else { first };
    let made = json_of(&env.api::<ResourceHandle>(), &created)
        .await
        .expect("handle");
    assert!(
        self::created(&made) >= start,
        "created at or after the start: {made}"
    );
    let created_cm = resource_name(&created, 0);
    eventually("the created handle's ConfigMap", TIMEOUT, || {
        configmap(&env, &created_cm)
    })
    .await;

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
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
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

/// Acceptance (c), Δ§2.4–2.5: a pool's `resourceLabels` and `resourceAnnotations` go to its
/// handles and from there onto every resource they make, and stay there once a claim binds.
/// (Providers have no such fields, Δ§2.6: pools and handles carry them.)
#[tokio::test]
async fn c_pool_resource_labels_and_annotations_reach_handles_and_resources() {
    let env = TestEnv::new().await;
    create_provider(&env, false).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let pool = objects::pool(
        "labelled",
        json!({
            "minAvailable": 1,
            "resourceLabels": {"example.com/team": "blue"},
            "resourceAnnotations": {"example.com/note": "pooled"},
            // Some data of its own: with none, the claim's data would be an `add /data`,
            // which the provider's `/data/.*` update filter does not let through (§12.2).
            "resources": [{"name": "config", "provider": objects::provider_ref("config", &env.namespace),
                           "template": template(json!({"owner": "nobody"}))}],
        }),
    );
    env.create(&pool).await;
    let pooled = eventually("a pool handle", TIMEOUT, || async {
        handles(&env).await.first().map(|h| h.name_any())
    })
    .await;
    ready_handle(&env, &pooled).await;
    let carries = |cm: &ConfigMap| {
        cm.labels().get("example.com/team").map(String::as_str) == Some("blue")
            && cm.annotations().get("example.com/note").map(String::as_str) == Some("pooled")
            && cm.labels().get(KIND_LABEL).map(String::as_str) == Some("config")
    };
    let cm = configmap(&env, &resource_name(&pooled, 0))
        .await
        .expect("ConfigMap");
    assert!(carries(&cm), "{:?} {:?}", cm.labels(), cm.annotations());

    create_claim(&env, "user", json!({}), json!({}), json!({"owner": "user"})).await;
    assert_eq!(bound(&env, "user").await, pooled);
    let handle = json_of(&env.api::<ResourceHandle>(), &pooled)
        .await
        .expect("handle");
    assert_eq!(
        handle["spec"]["resourceLabels"],
        json!({"example.com/team": "blue"})
    );
    assert_eq!(
        handle["spec"]["resourceAnnotations"],
        json!({"example.com/note": "pooled"})
    );
    let cm = eventually(
        "the claim's data on the labelled ConfigMap",
        TIMEOUT,
        || async {
            let cm = configmap(&env, &resource_name(&pooled, 0)).await?;
            (cm.data.as_ref()?.get("owner")? == "user").then_some(cm)
        },
    )
    .await;
    assert!(carries(&cm), "{:?} {:?}", cm.labels(), cm.annotations());
    // The pool's replacement handle carries them too.
    let replacement = eventually("the pool's replacement", TIMEOUT, || async {
        handles(&env)
            .await
            .into_iter()
            .find(|h| h.name_any() != pooled)
            .map(|h| h.name_any())
    })
    .await;
    let replacement_cm = resource_name(&replacement, 0);
    let cm = eventually("the replacement's ConfigMap", TIMEOUT, || {
        configmap(&env, &replacement_cm)
    })
    .await;
    assert!(carries(&cm), "{:?} {:?}", cm.labels(), cm.annotations());

    env.teardown([operator]).await;
}

/// Acceptance (d), §7.6: while a claim carries `D/ignore`, its edits are not acted on and a
/// new ignored claim is not even given a handle; once the label goes, management resumes.
#[tokio::test]
async fn d_an_ignored_claim_is_paused_until_the_label_goes() {
    let env = TestEnv::new().await;
    create_provider(&env, false).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let claims: Api<ResourceClaim> = env.api();
    create_claim(&env, "paused", json!({}), json!({}), json!({"v": "one"})).await;
    let handle = bound(&env, "paused").await;
    let cm = resource_name(&handle, 0);
    eventually("the ConfigMap", TIMEOUT, || async {
        let data = configmap(&env, &cm).await?.data?;
        (data.get("v")? == "one").then_some(())
    })
    .await;

    set_ignored(&claims, "paused", true).await;
    let edit =
        json!([{"op": "replace", "path": "/spec/resources/0/template/data/v", "value": "two"}]);
    claims
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Json::<()>(from_json(edit)),
        )
        .await
        .expect("editing the ignored claim");
    let ignored = json!({"labels": {key("ignore"): ""}});
    create_claim(&env, "new-ignored", ignored, json!({}), json!({})).await;
    // A claim created after both, bound and provisioned, is the barrier: they were seen.
    create_claim(&env, "barrier", json!({}), json!({}), json!({})).await;
    let barrier = bound(&env, "barrier").await;
    ready_handle(&env, &barrier).await;
    let data = configmap(&env, &cm)
        .await
        .expect("ConfigMap")
        .data
        .expect("data");
    assert_eq!(data["v"], "one", "the ignored claim's edit is not acted on");
    let handle_now = json_of(&env.api::<ResourceHandle>(), &handle)
        .await
        .expect("handle");
    assert_eq!(
        handle_now["spec"]["resources"][0]["template"]["data"]["v"],
        "one"
    );
    let new_ignored = claims.get("new-ignored").await.expect("claim");
    assert!(
        new_ignored.status.is_none(),
        "no status on an ignored claim"
    );
    assert!(
        new_ignored.finalizers().is_empty(),
        "no finalizer on an ignored claim"
    );
    assert!(handles_of_claim(&env, "new-ignored").await.is_empty());

    set_ignored(&claims, "paused", false).await;
    eventually("the edit goes through once unignored", TIMEOUT, || async {
        let data = configmap(&env, &cm).await?.data?;
        (data.get("v")? == "two").then_some(())
    })
    .await;
    set_ignored(&claims, "new-ignored", false).await;
    let created = bound(&env, "new-ignored").await;
    ready_handle(&env, &created).await;
    assert_eq!(handles_of_claim(&env, "paused").await, [handle]);

    env.teardown([operator]).await;
}

/// Acceptance (d), §7.6: claims restored from a backup are adopted, never given a second
/// handle: one restored with the ignore label and its status (pointing at its restored handle)
/// then unlabelled, and one restored without status after its handle (restored ignored).
#[tokio::test]
async fn d_restored_claims_are_adopted_not_duplicated() {
    let env = TestEnv::new().await;
    create_provider(&env, false).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let claims: Api<ResourceClaim> = env.api();
    let handles_api: Api<ResourceHandle> = env.api();
    let bound_spec = |claim: &str| {
        json!({
            "resourceClaim": objects::reference("ResourceClaim", claim, &env.namespace),
            "resources": handle_resources(&env, &[("config", json!({"v": claim}))]),
        })
    };
    let bound_labels = |claim: &str, ignored: bool| {
        let mut labels = json!({key("resource-claim-name"): claim,
                                key("resource-claim-namespace"): env.namespace});
        if ignored {
            labels[key("ignore")] = json!("");
        }
        json!({"labels": labels, "finalizers": [D]})
    };

    // With status: the claim first (ignored), then its handle, then the claim's status.
    let ignored = json!({"labels": {key("ignore"): ""}, "finalizers": [D]});
    create_claim(
        &env,
        "with-status",
        ignored,
        json!({}),
        json!({"v": "with-status"}),
    )
    .await;
    let first = handle_name("with-status");
    create_handle(
        &env,
        &first,
        bound_labels("with-status", false),
        bound_spec("with-status"),
    )
    .await;
    let status = json!({"status": {"resourceHandle": objects::reference("ResourceHandle", &first, &env.namespace)}});
    claims
        .patch_status(
            "with-status",
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .expect("restoring the claim status");
    ready_handle(&env, &first).await;
    set_ignored(&claims, "with-status", false).await;
    await_object(&claims, "with-status", "mirrors its restored handle", |c| {
        c["status"]["resourceHandle"]["name"] == first.as_str() && c["status"]["ready"] == true
    })
    .await;

    // Without status: the handle first (ignored, as a restore makes it), then the claim.
    let second = handle_name("without-status");
    create_handle(
        &env,
        &second,
        bound_labels("without-status", true),
        bound_spec("without-status"),
    )
    .await;
    create_claim(
        &env,
        "without-status",
        json!({}),
        json!({}),
        json!({"v": "without-status"}),
    )
    .await;
    assert_eq!(bound(&env, "without-status").await, second, "adopted");
    set_ignored(&handles_api, &second, false).await;
    ready_handle(&env, &second).await;
    await_object(&claims, "without-status", "ready", |c| {
        c["status"]["ready"] == true
    })
    .await;

    assert_eq!(
        handles_of_claim(&env, "with-status").await,
        std::slice::from_ref(&first)
    );
    assert_eq!(
        handles_of_claim(&env, "without-status").await,
        std::slice::from_ref(&second)
    );
    assert_eq!(handles(&env).await.len(), 2, "no second handle was created");
    for (handle, v) in [(&first, "with-status"), (&second, "without-status")] {
        let cm = configmap(&env, &resource_name(handle, 0))
            .await
            .expect("ConfigMap");
        assert_eq!(cm.data.expect("data")["v"], v);
        assert_eq!(configmaps_of(&env, handle).await.len(), 1);
    }

    env.teardown([operator]).await;
}

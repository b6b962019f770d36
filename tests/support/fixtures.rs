//! Reads, writes and waits on the cluster that many tests share: handles and their status,
//! ConfigMaps, pools' unbound handles, the ignore label, and watches that record what the
//! operator did.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, Resource, ResourceExt};
use poolboy::api::{ResourceHandle, ResourcePool};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::objects::{self, key};
use super::{TIMEOUT, TestEnv, eventually, wait_for};

/// `t` as Kubernetes writes timestamps (RFC 3339, seconds, `Z`).
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Creates ResourceProvider `name` with `spec`.
pub async fn create_provider(env: &TestEnv, name: &str, spec: Value) {
    env.create(&objects::provider(name, spec)).await;
}

/// Creates a provider of objects of `api_version`/`kind` in the test namespace, with `extra`
/// merged into its spec.
pub async fn create_kind_provider(
    env: &TestEnv,
    name: &str,
    api_version: &str,
    kind: &str,
    extra: Value,
) {
    let provider = objects::kind_provider(&env.namespace, name, api_version, kind, extra);
    env.create(&provider).await;
}

/// Creates the handle `metadata` + `spec` (named `guid-…` by the API server when `metadata`
/// has no name).
pub async fn create_handle(env: &TestEnv, metadata: Value, spec: Value) -> ResourceHandle {
    env.create(&objects::handle(metadata, spec)).await
}

/// Creates handle `name` with `metadata` and `spec`.
pub async fn create_named_handle(
    env: &TestEnv,
    name: &str,
    metadata: Value,
    spec: Value,
) -> ResourceHandle {
    create_handle(env, objects::merged(metadata, json!({"name": name})), spec).await
}

/// A handle name of this test: `guid-<what>-<random>` (its ConfigMaps: `guid<i>-…`).
pub fn guid_name(what: &str) -> String {
    format!("guid-{what}-{}", super::random_suffix())
}

/// What follows `guid-` in the name of `handle`.
pub fn guid(handle: &ResourceHandle) -> String {
    handle
        .name_any()
        .strip_prefix("guid-")
        .expect("guid- name")
        .to_owned()
}

pub async fn handle(env: &TestEnv, name: &str) -> Option<ResourceHandle> {
    env.api::<ResourceHandle>()
        .get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading handle {name}: {e}"))
}

/// `status` of handle `name` as JSON, once it exists and has one.
pub async fn handle_status(env: &TestEnv, name: &str) -> Option<Value> {
    serde_json::to_value(handle(env, name).await?.status?).ok()
}

pub async fn configmap(env: &TestEnv, name: &str) -> Option<ConfigMap> {
    env.api::<ConfigMap>()
        .get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading ConfigMap {name}: {e}"))
}

/// Every handle of the test's namespace.
pub async fn handles(env: &TestEnv) -> Vec<ResourceHandle> {
    env.api::<ResourceHandle>()
        .list(&ListParams::default())
        .await
        .expect("listing handles")
        .items
}

/// The handles bound to claim `claim`.
pub async fn handles_of_claim(env: &TestEnv, claim: &str) -> Vec<String> {
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
pub async fn configmaps_of(env: &TestEnv, handle: &str) -> BTreeSet<String> {
    let configmaps = env.configmaps_of_handle(handle).await;
    configmaps.iter().map(ResourceExt::name_any).collect()
}

pub async fn create_pool(env: &TestEnv, name: &str, spec: Value) -> ResourcePool {
    env.create(&objects::pool(name, spec)).await
}

/// A handle neither bound nor being deleted.
pub fn is_unbound(handle: &ResourceHandle) -> bool {
    handle.spec.resource_claim.is_none() && handle.metadata.deletion_timestamp.is_none()
}

/// Every handle of pool `pool` that is neither bound nor being deleted.
pub async fn unbound_of(env: &TestEnv, pool: &str) -> Vec<ResourceHandle> {
    env.handles_of_pool(pool)
        .await
        .into_iter()
        .filter(is_unbound)
        .collect()
}

/// Object `name` of `api` as JSON, if it exists.
pub async fn json_of<K>(api: &Api<K>, name: &str) -> Option<Value>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Serialize,
{
    let object = api.get_opt(name).await.expect("reading an object")?;
    serde_json::to_value(object).ok()
}

/// Waits until `name` of `api` satisfies `check`, and returns it as JSON.
pub async fn await_object<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Serialize,
{
    let object = wait_for(api, name, what, TIMEOUT, |o| {
        serde_json::to_value(o).is_ok_and(|o| check(&o))
    })
    .await;
    serde_json::to_value(object).expect("an object serialises")
}

/// A JSON merge patch of object `name` of `api`.
pub async fn merge<K>(api: &Api<K>, name: &str, patch: Value)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching {name}: {e}"));
}

/// Sets (or removes) the `D/ignore` label of object `name` of `api` (§7.6).
pub async fn set_ignored<K>(api: &Api<K>, name: &str, ignored: bool)
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

/// Waits until handle `name` has a status whose every resource has a reference and a live
/// state, and whose `Valid` condition is true: a reconcile went all the way through. For
/// providers without a readinessCheck: there, only a resource without state is `ready: false`
/// (§13).
pub async fn managed_through(env: &TestEnv, name: &str) -> Value {
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

/// Waits until the server's clock (as seen in a new object's creationTimestamp) has moved
/// past `after`: creation timestamps have a resolution of one second, and age ordering needs
/// two handles a second apart.
pub async fn a_second_after(after: DateTime<Utc>) {
    eventually("a second to pass", TIMEOUT, || async {
        (Utc::now() > after + TimeDelta::milliseconds(1100)).then_some(())
    })
    .await;
}

/// The creationTimestamp of an object given as JSON.
pub fn created(object: &Value) -> DateTime<Utc> {
    let text = object["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or_default();
    DateTime::parse_from_rfc3339(text)
        .expect("a creationTimestamp")
        .with_timezone(&Utc)
}

/// Every ConfigMap name the test namespace ever showed, from a watch started (and listed)
/// before the call returns.
pub async fn record_configmaps(env: &TestEnv) -> Arc<Mutex<BTreeSet<String>>> {
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
pub async fn record_versions<K>(env: &TestEnv, name: &str) -> Arc<Mutex<Vec<Value>>>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Serialize
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

/// An example of `examples/`, parsed.
pub fn example(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// Installs the AnarchySubject stand-in (cluster-scoped: another test may have made it).
pub async fn install_anarchy_subjects(client: &Client) {
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
        super::SETTLE_TIMEOUT,
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await
    .expect("the AnarchySubject CRD is established")
    .expect("watching the CRD");
}

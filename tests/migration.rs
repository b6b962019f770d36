//! Moving over from Poolboy 1.17 (README, "Moving from Poolboy 1.17"): installations exactly
//! as Poolboy 1.17.3 wrote them (tests/fixtures/poolboy-1.17.3: pools and claims of template
//! providers; a pool with a lifespan, resource labels and annotations; a pool with scalings; a
//! pool whose resources require a claim; a claim whose requested end Poolboy slides forward;
//! linked providers with parameters, and approval), and the first in shapes Poolboy writes
//! too (a pool with vars, the spec references of older releases, the finalizer and shard
//! labels of its manager mode), are taken over with no object created or deleted, no claim
//! rebound, the claims' status kept, and no write but those docs/compatibility.md lists under
//! "Taking over from Poolboy".

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, ResourceExt};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually};

const D: &str = "poolboy.gpte.redhat.com";

/// The kinds an installation holds, in the order they are loaded.
const KINDS: [(&str, &str); 6] = [
    ("ResourceProvider", "resourceproviders"),
    ("ResourcePool", "resourcepools"),
    ("ResourcePoolScaling", "resourcepoolscalings"),
    ("ResourceHandle", "resourcehandles"),
    ("ResourceClaim", "resourceclaims"),
    ("ConfigMap", "configmaps"),
];

/// What the broker may write when it takes an installation over, by kind, as JSON pointers
/// (`*` stands for one segment). docs/compatibility.md, "Taking over from Poolboy", says why
/// each is written.
const TAKEOVER_WRITES: &[(&str, &str)] = &[
    ("ResourceClaim", "/status/conditions"),
    (
        "ResourceClaim",
        "/status/resources/*/state/metadata/creationTimestamp",
    ),
    ("ResourceClaim", "/status/waitEstimate/**"),
    ("ResourceHandle", "/status/conditions"),
    ("ResourcePool", "/status/conditions"),
    ("ResourcePool", "/status/resourceHandleCount/**"),
    ("ResourcePool", "/status/resourceHandles/**"),
    ("ResourcePoolScaling", "/status/state"),
    ("ResourceProvider", "/status"),
];

/// The API of `kind` in the test namespace, for objects as raw JSON (nothing dropped by a
/// typed model: kopf's `diffBase` stays as Poolboy wrote it).
fn api(env: &TestEnv, kind: &str) -> Api<DynamicObject> {
    let (kind, plural) = KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .copied()
        .unwrap_or_else(|| panic!("no kind {kind}"));
    let gvk = match kind {
        "ConfigMap" => GroupVersionKind::gvk("", "v1", kind),
        _ => GroupVersionKind::gvk(D, "v1", kind),
    };
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    Api::namespaced_with(env.client.clone(), &env.namespace, &resource)
}

/// The objects Poolboy 1.17.3 wrote, moved to `namespace` (both its operator namespace,
/// `poolboy`, and the claims' namespace, `mig-user`, become the test namespace).
fn recorded_installation(namespace: &str) -> Vec<Value> {
    recorded(
        include_str!("fixtures/poolboy-1.17.3/objects.json"),
        namespace,
    )
}

/// The objects of `list` (a `v1` List of the fixture), moved to `namespace` as
/// [`recorded_installation`] says, and to the present ([`as_if_recorded_now`]).
fn recorded(list: &str, namespace: &str) -> Vec<Value> {
    let list: Value = serde_json::from_str(list).expect("the fixture is JSON");
    let mut items = list["items"].as_array().cloned().expect("a List");
    for item in &mut items {
        for_each_string(item, &mut |text| rename_namespace(text, namespace));
    }
    as_if_recorded_now(&mut items);
    items
}

/// Moves every timestamp of `objects` by the time since the newest of them was created: the
/// recording as if made now, so that the lifespans it holds are as far from their ends as they
/// were then (an end that had passed would make the broker delete what it takes over).
fn as_if_recorded_now(objects: &mut [Value]) {
    let newest = objects
        .iter()
        .filter_map(|o| o["metadata"]["creationTimestamp"].as_str())
        .filter_map(|t| DateTime::parse_from_rfc3339(t).ok())
        .max();
    let Some(newest) = newest else {
        return;
    };
    let by = Utc::now().signed_duration_since(newest);
    for object in objects {
        for_each_string(object, &mut |text| shift_timestamp(text, by));
    }
}

/// A timestamp to the second, as the API server (`…Z`) or Poolboy (`…+00:00`) writes one,
/// moved by `by` and written back in the same form; any other string stays as it is.
fn shift_timestamp(text: &mut String, by: TimeDelta) {
    let utc_z = match text.len() {
        20 if text.ends_with('Z') => true,
        25 if text.ends_with("+00:00") => false,
        _ => return,
    };
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        *text = (at.with_timezone(&Utc) + by).to_rfc3339_opts(SecondsFormat::Secs, utc_z);
    }
}

/// A string `poolboy` or `mig-user` becomes `namespace`.
fn rename_namespace(text: &mut String, namespace: &str) {
    if text == "poolboy" || text == "mig-user" {
        *text = namespace.to_owned();
    }
}

/// Calls `f` on every string of `value`, at any depth; kopf's `diffBase`, a string holding
/// JSON, is one string like any other.
fn for_each_string(value: &mut Value, f: &mut impl FnMut(&mut String)) {
    match value {
        Value::String(text) => f(text),
        Value::Array(items) => items.iter_mut().for_each(|v| for_each_string(v, f)),
        Value::Object(fields) => fields.values_mut().for_each(|v| for_each_string(v, f)),
        _ => {}
    }
}

fn of_kind<'a>(objects: &'a mut [Value], kind: &'a str) -> impl Iterator<Item = &'a mut Value> {
    objects.iter_mut().filter(move |o| o["kind"] == kind)
}

fn named<'a>(objects: &'a mut [Value], kind: &str, name: &str) -> &'a mut Value {
    objects
        .iter_mut()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// Loads `objects` as the fixture's README says: without uid, resourceVersion,
/// creationTimestamp and generation, each created and then its `status` written through the
/// status subresource. The ConfigMaps the handles reference are created as the fixture
/// recorded them, or, where it holds none, as Poolboy creates them; each claim's
/// `status.resources[].state` is its ConfigMap as Poolboy records it.
async fn load(env: &TestEnv, mut objects: Vec<Value>) {
    // ConfigMaps come last, made for their handles as loaded.
    for (kind, _) in KINDS.iter().filter(|(kind, _)| *kind != "ConfigMap") {
        for object in of_kind(&mut objects, kind) {
            create_with_status(env, kind, object).await;
        }
    }
    let handles: Vec<Value> = objects
        .iter()
        .filter(|o| o["kind"] == "ResourceHandle")
        .cloned()
        .collect();
    let mut states = BTreeMap::new();
    for handle in &handles {
        let handle = api(env, "ResourceHandle")
            .get(handle["metadata"]["name"].as_str().unwrap_or_default())
            .await
            .expect("the handle as created");
        let handle = serde_json::to_value(handle).expect("JSON");
        for (index, reference) in references(&handle).into_iter().enumerate() {
            let name = text(&reference["name"]);
            let configmap = match objects
                .iter()
                .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == name.as_str())
            {
                Some(recorded) => of_handle(recorded.clone(), &handle),
                None => as_poolboy_makes_it(&handle, index, &reference),
            };
            let configmap: ConfigMap = serde_json::from_value(configmap).expect("a ConfigMap");
            let created = env
                .api::<ConfigMap>()
                .create(&PostParams::default(), &configmap)
                .await
                .unwrap_or_else(|e| panic!("creating ConfigMap {name}: {e}"));
            let created = serde_json::to_value(created).expect("JSON");
            states.insert(name, poolboy_state(created));
        }
    }
    for claim in of_kind(&mut objects, "ResourceClaim") {
        let name = claim["metadata"]["name"].as_str().unwrap_or_default();
        let Some(resources) = claim["status"]["resources"].as_array() else {
            continue;
        };
        let resources: Vec<Value> = resources
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if let Some(state) = states.get(&text(&r["reference"]["name"])) {
                    r["state"] = state.clone();
                }
                r
            })
            .collect();
        api(env, "ResourceClaim")
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"resources": resources}})),
            )
            .await
            .unwrap_or_else(|e| panic!("the state of claim {name}: {e}"));
    }
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

async fn create_with_status(env: &TestEnv, kind: &str, object: &Value) {
    let mut object = object.clone();
    let status = object.as_object_mut().and_then(|o| o.remove("status"));
    if let Some(metadata) = object["metadata"].as_object_mut() {
        for field in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
            metadata.remove(field);
        }
    }
    // An owner (a scaling's pool) was loaded before, under a new uid: the garbage collector
    // deletes what names an owner that does not exist.
    let owners = object["metadata"]["ownerReferences"].as_array_mut();
    for owner in owners.into_iter().flatten() {
        let loaded = api(env, &text(&owner["kind"]))
            .get(&text(&owner["name"]))
            .await
            .unwrap_or_else(|e| panic!("the owner {owner}: {e}"));
        owner["uid"] = json!(loaded.uid());
    }
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let api = api(env, kind);
    let typed: DynamicObject = serde_json::from_value(object).expect("an object");
    api.create(&PostParams::default(), &typed)
        .await
        .unwrap_or_else(|e| panic!("creating {kind} {name}: {e}"));
    if let Some(status) = status {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .unwrap_or_else(|e| panic!("the status of {kind} {name}: {e}"));
    }
}

/// The references of a handle's resources: from its status, or from its spec where older
/// releases kept them.
fn references(handle: &Value) -> Vec<Value> {
    let spec = handle["spec"]["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let status = handle["status"]["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    (0..spec.len().max(status.len()))
        .filter_map(|i| {
            let from_status = status.get(i).map(|r| r["reference"].clone());
            let from_spec = spec.get(i).map(|r| r["reference"].clone());
            [from_status, from_spec]
                .into_iter()
                .flatten()
                .find(|r| r.is_object())
        })
        .collect()
}

/// A ConfigMap the fixture recorded, to be created again for `handle` as loaded: without what
/// the API server sets, and annotated with the handle's new uid.
fn of_handle(mut configmap: Value, handle: &Value) -> Value {
    if let Some(metadata) = configmap["metadata"].as_object_mut() {
        for field in ["uid", "resourceVersion", "creationTimestamp"] {
            metadata.remove(field);
        }
    }
    configmap["metadata"]["annotations"][format!("{D}/resource-handle-uid")] =
        handle["metadata"]["uid"].clone();
    configmap
}

/// The ConfigMap of `handle`'s resource `index`, labelled and annotated as Poolboy labels and
/// annotates what it creates (its `resourceprovider.py`), with the template the handle names.
fn as_poolboy_makes_it(handle: &Value, index: usize, reference: &Value) -> Value {
    let spec = &handle["spec"];
    let resource = &spec["resources"][index];
    let mut annotations = Map::new();
    for (key, value) in [
        ("resource-provider-name", &resource["provider"]["name"]),
        (
            "resource-provider-namespace",
            &resource["provider"]["namespace"],
        ),
        ("resource-handle-name", &handle["metadata"]["name"]),
        (
            "resource-handle-namespace",
            &handle["metadata"]["namespace"],
        ),
        ("resource-handle-uid", &handle["metadata"]["uid"]),
        ("resource-index", &json!(index.to_string())),
        ("resource-claim-name", &spec["resourceClaim"]["name"]),
        (
            "resource-claim-namespace",
            &spec["resourceClaim"]["namespace"],
        ),
        ("resource-pool-name", &spec["resourcePool"]["name"]),
        (
            "resource-pool-namespace",
            &spec["resourcePool"]["namespace"],
        ),
    ] {
        if let Some(value) = value.as_str() {
            annotations.insert(format!("{D}/{key}"), json!(value));
        }
    }
    // Poolboy puts a pool's resourceAnnotations and resourceLabels, which its handles carry,
    // on each resource beside its own annotations.
    if let Some(extra) = spec["resourceAnnotations"].as_object() {
        annotations.extend(extra.clone());
    }
    let mut configmap = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": reference["name"],
            "generateName": format!("guid{index}-"),
            "annotations": annotations,
        },
    });
    if let Some(labels) = spec["resourceLabels"].as_object() {
        configmap["metadata"]["labels"] = json!(labels);
    }
    if let Some(data) = resource["template"].get("data") {
        configmap["data"] = data.clone();
    }
    configmap
}

/// `resource` as Poolboy 1.17 records it in a claim's `status.resources[].state`
/// (`prune_k8s_resource`): without `managedFields`, `generation` and the annotations of its
/// domain, and its creation time as Python prints it (`+00:00`).
fn poolboy_state(mut resource: Value) -> Value {
    if let Some(metadata) = resource["metadata"].as_object_mut() {
        metadata.remove("managedFields");
        metadata.remove("generation");
        if let Some(Value::Object(annotations)) = metadata.get_mut("annotations") {
            annotations.retain(|key, _| !key.starts_with(&format!("{D}/")));
            if annotations.is_empty() {
                metadata.remove("annotations");
            }
        }
        if let Some(Value::String(created)) = metadata.get_mut("creationTimestamp") {
            *created = created.replace('Z', "+00:00");
        }
    }
    resource
}

/// Every object of the test namespace, by kind and name.
async fn snapshot(env: &TestEnv) -> BTreeMap<(String, String), Value> {
    let mut objects = BTreeMap::new();
    for (kind, _) in KINDS {
        let list = api(env, kind)
            .list(&Default::default())
            .await
            .unwrap_or_else(|e| panic!("listing {kind}: {e}"));
        for object in list {
            let name = object.name_any();
            let value = serde_json::to_value(object).expect("JSON");
            objects.insert((kind.to_owned(), name), value);
        }
    }
    objects
}

/// What the watches saw after they had listed: each write, and when the last one came.
#[derive(Default)]
struct Writes {
    /// (kind, name, uid, deleting) of every object written.
    applied: Vec<(String, String, String, bool)>,
    deleted: Vec<(String, String)>,
    last: Option<Instant>,
}

/// Watches every kind of the installation; returns once each watch has listed.
async fn record_writes(env: &TestEnv) -> Arc<Mutex<Writes>> {
    let writes = Arc::new(Mutex::new(Writes::default()));
    for (kind, _) in KINDS {
        let listed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (record, done) = (writes.clone(), listed.clone());
        let mut stream = watcher(api(env, kind), watcher::Config::default()).boxed();
        tokio::spawn(async move {
            while let Some(event) = stream.next().await {
                let Ok(mut writes) = record.lock() else {
                    return;
                };
                match event {
                    Ok(Event::Apply(object)) => {
                        writes.applied.push((
                            kind.to_owned(),
                            object.name_any(),
                            object.uid().unwrap_or_default(),
                            object.metadata.deletion_timestamp.is_some(),
                        ));
                        writes.last = Some(Instant::now());
                    }
                    Ok(Event::Delete(object)) => {
                        writes.deleted.push((kind.to_owned(), object.name_any()));
                        writes.last = Some(Instant::now());
                    }
                    Ok(Event::InitDone) => done.store(true, std::sync::atomic::Ordering::SeqCst),
                    _ => {}
                }
            }
        });
        eventually(&format!("the {kind} watch listed"), TIMEOUT, || async {
            listed
                .load(std::sync::atomic::Ordering::SeqCst)
                .then_some(())
        })
        .await;
    }
    writes
}

/// Waits until nothing has been written for `quiet` (at most [`TIMEOUT`]).
async fn settled(writes: &Arc<Mutex<Writes>>, quiet: Duration) {
    let started = Instant::now();
    eventually("the installation to settle", TIMEOUT, || async {
        let last = writes.lock().ok()?.last.unwrap_or(started);
        (last.elapsed() >= quiet).then_some(())
    })
    .await;
}

/// The JSON pointers at which `before` and `after` differ: leaves, or a whole array whose
/// length changed.
fn differences(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let child = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => differences(x, y, &child, out),
                    _ => out.push(child),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(x, y, &format!("{path}/{i}"), out);
            }
        }
        _ if before == after => {}
        _ => out.push(path.to_owned()),
    }
}

/// Whether `path` matches `pattern`, where a `*` segment matches any one segment and a
/// trailing `/**` anything below.
fn matches(pattern: &str, path: &str) -> bool {
    let (pattern, below) = match pattern.strip_suffix("/**") {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let p: Vec<&str> = pattern.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    (s.len() == p.len() || (below && s.len() > p.len()))
        && p.iter().zip(&s).all(|(p, s)| *p == "*" || p == s)
}

/// The writes of the takeover that docs/compatibility.md does not list, as `kind name path`.
fn unlisted_writes(
    before: &BTreeMap<(String, String), Value>,
    after: &BTreeMap<(String, String), Value>,
    also_listed: &[(&str, &str)],
) -> Vec<String> {
    let mut unlisted = Vec::new();
    for ((kind, name), old) in before {
        let Some(new) = after.get(&(kind.clone(), name.clone())) else {
            continue;
        };
        let mut changed = Vec::new();
        differences(old, new, "", &mut changed);
        for path in changed {
            let bookkeeping = [
                "/metadata/resourceVersion",
                "/metadata/managedFields",
                "/metadata/generation",
            ]
            .iter()
            .any(|p| path == *p || path.starts_with(&format!("{p}/")));
            let listed = TAKEOVER_WRITES
                .iter()
                .chain(also_listed)
                .any(|(k, pattern)| k == kind && matches(pattern, &path));
            if !bookkeeping && !listed {
                unlisted.push(format!("{kind} {name} {path}"));
            }
        }
    }
    unlisted
}

/// Every leaf of `value`, as JSON pointers.
fn leaves(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(fields) if !fields.is_empty() => {
            for (key, v) in fields {
                leaves(
                    v,
                    &format!("{path}/{}", key.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                leaves(v, &format!("{path}/{i}"), out);
            }
        }
        _ => out.push(path.to_owned()),
    }
}

/// Takes `objects` over: loads them, starts the broker, waits until it has judged every
/// object and nothing more is written, and checks the takeover as the module says, with the
/// writes of `also_listed` (by kind, as in [`TAKEOVER_WRITES`]) allowed besides. Returns the
/// running broker.
async fn take_over(
    env: &TestEnv,
    objects: Vec<Value>,
    also_listed: &[(&str, &str)],
) -> TestOperator {
    load(env, objects).await;
    let before = snapshot(env).await;
    let writes = record_writes(env).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);

    // The broker has judged the pool once its condition about the handles' versions is up,
    // and every claim once it carries its Ready condition.
    let pools = api(env, "ResourcePool");
    let claims = api(env, "ResourceClaim");
    eventually(
        "the broker to judge every pool and claim",
        TIMEOUT,
        || async {
            let judged = |object: &DynamicObject, condition: &str| {
                object.data["status"]["conditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["type"] == condition))
            };
            let pools = pools.list(&Default::default()).await.ok()?;
            let claims = claims.list(&Default::default()).await.ok()?;
            (pools.iter().all(|p| judged(p, "HandlesUpToDate"))
                && claims.iter().all(|c| judged(c, "Ready")))
            .then_some(())
        },
    )
    .await;
    settled(&writes, Duration::from_secs(3)).await;
    let after = snapshot(env).await;

    let writes = writes.lock().expect("the record");
    let known: BTreeSet<&str> = before
        .values()
        .filter_map(|o| o["metadata"]["uid"].as_str())
        .collect();
    let created: BTreeSet<_> = writes
        .applied
        .iter()
        .filter(|(_, _, uid, _)| !known.contains(uid.as_str()))
        .map(|(kind, name, _, _)| format!("{kind} {name}"))
        .collect();
    let deleting: BTreeSet<_> = writes
        .applied
        .iter()
        .filter(|(.., deleting)| *deleting)
        .map(|(kind, name, ..)| format!("{kind} {name}"))
        .chain(
            writes
                .deleted
                .iter()
                .map(|(kind, name)| format!("{kind} {name}")),
        )
        .collect();
    assert_eq!(created, BTreeSet::new(), "objects created on takeover");
    assert_eq!(deleting, BTreeSet::new(), "objects deleted on takeover");
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "the same objects"
    );

    for ((kind, name), old) in before.iter().filter(|((k, _), _)| k == "ResourceClaim") {
        let new = &after[&(kind.clone(), name.clone())];
        assert_eq!(
            new["status"]["resourceHandle"], old["status"]["resourceHandle"],
            "claim {name} keeps its handle"
        );
        let mut kept = Vec::new();
        leaves(&old["status"], "/status", &mut kept);
        let mut now = Vec::new();
        leaves(&new["status"], "/status", &mut now);
        let now: BTreeSet<String> = now.into_iter().collect();
        let lost: Vec<&String> = kept.iter().filter(|p| !now.contains(*p)).collect();
        assert!(
            lost.is_empty(),
            "claim {name} lost status fields Poolboy wrote: {lost:?}"
        );
    }
    let unlisted = unlisted_writes(&before, &after, also_listed);
    assert!(
        unlisted.is_empty(),
        "writes on takeover that docs/compatibility.md does not list:\n{}",
        unlisted.join("\n")
    );
    operator
}

/// The names of the unbound handles of pool `pool`.
async fn unbound_handles(env: &TestEnv, pool: &str) -> BTreeSet<String> {
    api(env, "ResourceHandle")
        .list(&Default::default())
        .await
        .expect("listing handles")
        .into_iter()
        .filter(|h| h.data["spec"]["resourcePool"]["name"] == pool)
        .filter(|h| h.data["spec"].get("resourceClaim").is_none())
        .map(|h| h.name_any())
        .collect()
}

/// The pool's unbound handles in the recorded installation.
const UNBOUND: [&str; 3] = ["guid-5k2mx", "guid-b9ddc", "guid-fh5dm"];

/// Edits the first template of claim `edited` (its `data.k`, which the providers' update
/// filters let through) and waits until ConfigMap `configmap` has the edit.
async fn edit_reaches_its_configmap(env: &TestEnv, edited: &str, configmap: &str) {
    let claims = api(env, "ResourceClaim");
    let claim = claims.get(edited).await.expect("the claim");
    let mut resources = claim.data["spec"]["resources"].clone();
    resources[0]["template"]["data"]["k"] = json!("edited");
    claims
        .patch(
            edited,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": resources}})),
        )
        .await
        .expect("editing the claim");
    let configmaps = env.api::<ConfigMap>();
    eventually("the edit to reach the ConfigMap", TIMEOUT, || async {
        let data = configmaps.get(configmap).await.ok()?.data?;
        (data.get("k").map(String::as_str) == Some("edited")).then_some(())
    })
    .await;
}

/// After the takeover the broker manages what it took over: a claim's template edit reaches
/// its ConfigMap, and a deleted claim takes its handle and ConfigMap with it (through
/// Poolboy's finalizers).
async fn managed_after_takeover(env: &TestEnv, edited: &str, configmap: &str, deleted: &str) {
    edit_reaches_its_configmap(env, edited, configmap).await;

    let claims = api(env, "ResourceClaim");
    let configmaps = env.api::<ConfigMap>();
    let claim = claims.get(deleted).await.expect("the claim");
    let handle = claim.data["status"]["resourceHandle"]["name"].clone();
    let handle = handle.as_str().unwrap_or_default().to_owned();
    let resource = text(&claim.data["status"]["resources"][0]["reference"]["name"]);
    claims
        .delete(deleted, &Default::default())
        .await
        .expect("deleting the claim");
    let handles = api(env, "ResourceHandle");
    eventually(
        "the claim, its handle and its ConfigMap to go",
        TIMEOUT,
        || async {
            let gone = claims.get_opt(deleted).await.ok()?.is_none()
                && handles.get_opt(&handle).await.ok()?.is_none()
                && configmaps.get_opt(&resource).await.ok()?.is_none();
            gone.then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn the_recorded_installation_moves_over_untouched() {
    let env = TestEnv::new().await;
    let objects = recorded_installation(&env.namespace);
    let operator = take_over(&env, objects, &[]).await;
    assert_eq!(
        unbound_handles(&env, "pool").await,
        BTreeSet::from(UNBOUND.map(str::to_owned)),
    );
    managed_after_takeover(&env, "warm1", "guid0-xn5p2", "cold1").await;
    assert_eq!(
        unbound_handles(&env, "pool").await,
        BTreeSet::from(UNBOUND.map(str::to_owned)),
        "the pool's handles stay through the edit and the deletion"
    );
    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_pool_with_vars_moves_over_untouched() {
    let env = TestEnv::new().await;
    let mut objects = recorded_installation(&env.namespace);
    let vars = json!({"greeting": "hello", "sizes": {"small": 1}});
    named(&mut objects, "ResourcePool", "pool")["spec"]["vars"] = vars.clone();
    // Poolboy's create_for_pool copies the pool's vars into each handle it makes.
    for handle in of_kind(&mut objects, "ResourceHandle") {
        if handle["spec"].get("resourcePool").is_some() {
            handle["spec"]["vars"] = vars.clone();
        }
    }
    let operator = take_over(&env, objects, &[]).await;
    assert_eq!(
        unbound_handles(&env, "pool").await,
        BTreeSet::from(UNBOUND.map(str::to_owned)),
    );
    env.teardown([operator]).await;
}

/// The recorded installation as Poolboy's chart runs it by default (`operatorMode: manager`):
/// its resource handlers put their own finalizer, `D/handler`, on claims, handles and pools
/// (Δ§4.7), and the manager labels each with the shard that serves it. Taken over, no other
/// finalizer is added beside it (Poolboy's handlers would never remove it, and deleting the
/// object would hang after a move back), and a deleted claim still takes its handle and
/// ConfigMap with it.
#[tokio::test]
async fn an_installation_of_poolboys_manager_mode_moves_over_untouched() {
    let env = TestEnv::new().await;
    let mut objects = recorded_installation(&env.namespace);
    for kind in ["ResourcePool", "ResourceHandle", "ResourceClaim"] {
        for object in of_kind(&mut objects, kind) {
            object["metadata"]["finalizers"] = json!([format!("{D}/handler")]);
            object["metadata"]["labels"][format!("{D}/resource-handler-idx")] = json!("0");
        }
    }
    let operator = take_over(&env, objects, &[]).await;
    assert_eq!(
        unbound_handles(&env, "pool").await,
        BTreeSet::from(UNBOUND.map(str::to_owned)),
    );
    managed_after_takeover(&env, "warm1", "guid0-xn5p2", "cold1").await;
    env.teardown([operator]).await;
}

#[tokio::test]
async fn references_in_the_spec_as_poolboy_1_12_kept_them_move_over_untouched() {
    let env = TestEnv::new().await;
    let mut objects = recorded_installation(&env.namespace);
    // Poolboy 1.12 wrote each resource's reference into the handle's spec as well as its
    // status.
    for handle in of_kind(&mut objects, "ResourceHandle") {
        let references: Vec<Value> = handle["status"]["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["reference"].clone())
            .collect();
        for (index, reference) in references.into_iter().enumerate() {
            handle["spec"]["resources"][index]["reference"] = reference;
        }
    }
    let operator = take_over(&env, objects, &[]).await;
    assert_eq!(
        unbound_handles(&env, "pool").await,
        BTreeSet::from(UNBOUND.map(str::to_owned)),
    );
    managed_after_takeover(&env, "warm2", "guid0-64f9z", "cold1").await;
    env.teardown([operator]).await;
}

/// What taking over a claim whose requested end lies beyond its relativeMaximum writes besides
/// [`TAKEOVER_WRITES`] (docs/compatibility.md, "Taking over from Poolboy"): the clamped end,
/// into the claim's spec, its handle's spec and the claim's status.
const SLIDING_END_WRITES: &[(&str, &str)] = &[
    ("ResourceClaim", "/spec/lifespan/end"),
    ("ResourceClaim", "/status/lifespan/end"),
    ("ResourceHandle", "/spec/lifespan/end"),
];

/// Claim `slide1` asks for an end in 2099 of a provider whose relativeMaximum is 2 days:
/// Poolboy 1.17.3 clamps it to now + 2 days on every pass, so its handle's end slides forward
/// (tests/fixtures/poolboy-1.17.3/sliding-end.json, recorded while it slid). Taken over, the
/// clamped end is written back to the claim once, and a later pass keeps it where it is.
#[tokio::test]
async fn a_sliding_requested_end_is_written_back_once_and_stays_put() {
    let env = TestEnv::new().await;
    let objects = recorded(
        include_str!("fixtures/poolboy-1.17.3/sliding-end.json"),
        &env.namespace,
    );
    let claims = api(&env, "ResourceClaim");
    let handles = api(&env, "ResourceHandle");
    let operator = take_over(&env, objects, SLIDING_END_WRITES).await;
    let taken_over = claims.get("slide1").await.expect("the claim");
    let end = |object: &DynamicObject, at: &str| text(&object.data[at]["lifespan"]["end"]);
    let clamped = end(&taken_over, "spec");
    let clamped_at = DateTime::parse_from_rfc3339(&clamped).expect("an RFC 3339 end");
    let two_days = clamped_at.signed_duration_since(Utc::now());
    assert!(
        (TimeDelta::days(2) - two_days).num_seconds().abs() < 60,
        "the requested end is clamped to now + relativeMaximum: {clamped}"
    );
    assert_eq!(end(&taken_over, "status"), clamped, "the claim's status");
    let handle = handles.get("guid-nzdws").await.expect("the handle");
    assert_eq!(end(&handle, "spec"), clamped, "the handle's end");
    assert_eq!(
        taken_over.metadata.generation,
        Some(2),
        "the claim's spec is written once (created at generation 1)"
    );

    // A pass a second later (the edit's) would clamp it again to a later now, were the
    // clamped end not the claim's own by then.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    edit_reaches_its_configmap(&env, "slide1", "guid0-nzdws").await;
    let edited = claims.get("slide1").await.expect("the claim");
    assert_eq!(end(&edited, "spec"), clamped, "the claim's end stays put");
    assert_eq!(end(&edited, "status"), clamped, "its status too");
    let handle = handles.get("guid-nzdws").await.expect("the handle");
    assert_eq!(end(&handle, "spec"), clamped, "the handle's end stays put");
    env.teardown([operator]).await;
}

/// A pool with a lifespan (all four bounds), resource labels and annotations, vars, a
/// preference score, `maxUnready` and unhealthy deletion, and a claim bound to one of its
/// handles, as Poolboy 1.17.3 left them (tests/fixtures/poolboy-1.17.3/pool-with-lifespan.json):
/// taken over with nothing but the writes every takeover makes, the unbound handles kept.
#[tokio::test]
async fn a_pool_with_a_lifespan_labels_and_annotations_moves_over_untouched() {
    let env = TestEnv::new().await;
    let objects = recorded(
        include_str!("fixtures/poolboy-1.17.3/pool-with-lifespan.json"),
        &env.namespace,
    );
    let operator = take_over(&env, objects, &[]).await;
    let unbound = ["guid-rmvt2", "guid-srgg4", "guid-wf4cr"];
    assert_eq!(
        unbound_handles(&env, "lpool").await,
        BTreeSet::from(unbound.map(str::to_owned)),
    );
    env.teardown([operator]).await;
}

/// Claims of a provider that links another and takes parameters (one bound from a pool of
/// that provider, one with a handle of its own), and two claims of a provider that requires
/// approval (one approved and bound, one pending), as Poolboy 1.17.3 left them with the
/// ConfigMaps it made (tests/fixtures/poolboy-1.17.3/linked-and-approval.json): taken over with
/// nothing but the writes every takeover makes. Then a parameter edit reaches both of its
/// claim's resources (the linked one's data, and the one whose template reads it), and the
/// pending claim, once approved, is initialised and gets its handle and ConfigMap.
#[tokio::test]
async fn linked_providers_parameters_and_approval_move_over_untouched() {
    let env = TestEnv::new().await;
    // As where Poolboy made the claims' resources (the fixture's README): without it, the
    // broker would take `resource-requester-user` off them, as Poolboy would.
    env.annotate_requester("alice").await;
    let objects = recorded(
        include_str!("fixtures/poolboy-1.17.3/linked-and-approval.json"),
        &env.namespace,
    );
    let operator = take_over(&env, objects, &[]).await;
    let unbound = ["guid-l2jgz", "guid-mskpr"];
    assert_eq!(
        unbound_handles(&env, "lpool").await,
        BTreeSet::from(unbound.map(str::to_owned)),
    );

    let claims = api(&env, "ResourceClaim");
    let edit = json!({"spec": {"provider": {"parameterValues": {"color": "blue"}}}});
    claims
        .patch("linked1", &PatchParams::default(), &Patch::Merge(edit))
        .await
        .expect("editing the claim's parameters");
    let configmaps = env.api::<ConfigMap>();
    let color = |name: &'static str| {
        let configmaps = configmaps.clone();
        async move {
            let data = configmaps.get(name).await.ok()?.data?;
            data.get("color").cloned()
        }
    };
    eventually("the edit to reach both resources", TIMEOUT, || async {
        let base = color("lbase-qzm92-base").await?;
        let app = color("lapp-qzm92-app").await?;
        (base == "blue" && app == "BLUE").then_some(())
    })
    .await;

    let approval = json!({"status": {"approval": {"state": "approved"}}});
    claims
        .patch_status("pending1", &PatchParams::default(), &Patch::Merge(approval))
        .await
        .expect("approving the claim");
    let handle = eventually("the approved claim to be bound", TIMEOUT, || async {
        let claim = claims.get("pending1").await.ok()?;
        let handle = text(&claim.data["status"]["resourceHandle"]["name"]);
        let initialised = claim
            .annotations()
            .contains_key(&format!("{D}/resource-claim-init-timestamp"));
        (initialised && !handle.is_empty()).then_some(handle)
    })
    .await;
    let configmap = format!("approve-{}", handle.replace("guid-", ""));
    eventually("the approved claim's ConfigMap", TIMEOUT, || async {
        let data = configmaps.get(&configmap).await.ok()?.data?;
        (data.get("count").map(String::as_str) == Some("n4")).then_some(())
    })
    .await;
    env.teardown([operator]).await;
}

/// A pool of two handles Poolboy 1.17.3 made for a scaling it completed (`count: 2`, left with
/// the `state: waiting` its inverted state writes), and a scaling due in two days it has not
/// begun, both owned by the pool (tests/fixtures/poolboy-1.17.3/pool-scalings.json): taken over
/// with no handle made, each scaling's state written as it is; brought forward, the later
/// scaling makes its three handles.
#[tokio::test]
async fn a_pool_with_scalings_moves_over_untouched() {
    let env = TestEnv::new().await;
    let objects = recorded(
        include_str!("fixtures/poolboy-1.17.3/pool-scalings.json"),
        &env.namespace,
    );
    let operator = take_over(&env, objects, &[]).await;
    let made = ["guid-6mxj7", "guid-kg4hv"].map(str::to_owned);
    assert_eq!(unbound_handles(&env, "spool").await, BTreeSet::from(made));
    let scalings = api(&env, "ResourcePoolScaling");
    let state = |scaling: &DynamicObject| text(&scaling.data["status"]["state"]);
    let done = scalings.get("burst-done").await.expect("the scaling");
    assert_eq!(
        (state(&done), done.data["status"]["count"].clone()),
        ("done".to_owned(), json!(2))
    );
    let later = scalings.get("burst-later").await.expect("the scaling");
    assert_eq!(state(&later), "waiting");

    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    scalings
        .patch(
            "burst-later",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"at": now}})),
        )
        .await
        .expect("bringing the scaling forward");
    eventually("the later scaling to make its handles", TIMEOUT, || async {
        let later = scalings.get("burst-later").await.ok()?;
        let handles = unbound_handles(&env, "spool").await;
        (state(&later) == "done" && later.data["status"]["count"] == 3 && handles.len() == 5)
            .then_some(())
    })
    .await;
    env.teardown([operator]).await;
}

/// What taking over a handle whose resources wait for a claim writes besides
/// [`TAKEOVER_WRITES`] (docs/compatibility.md, "Taking over from Poolboy"): its readiness, false,
/// which Poolboy computes only from its resources' watch events, so never before they exist.
const WAITING_FOR_A_CLAIM_WRITES: &[(&str, &str)] = &[
    ("ResourceHandle", "/status/ready"),
    ("ResourceHandle", "/status/resources/*/ready"),
];

/// A pool of a provider with `resourceRequiresClaim`: Poolboy 1.17.3 made its unbound handles
/// without their resource (`status.resources: [{waitingFor: ResourceClaim}]`), and created the
/// resource of the handle claim `req1` took, from the claim's namespace and name
/// (tests/fixtures/poolboy-1.17.3/resource-requires-claim.json). Taken over, no resource is
/// made for the unbound handles; a new claim takes one, and its resource is made then, for it.
#[tokio::test]
async fn a_pool_whose_resources_require_a_claim_moves_over_untouched() {
    let env = TestEnv::new().await;
    // As where Poolboy made the claim's resource (the fixture's README).
    env.annotate_requester("alice").await;
    let objects = recorded(
        include_str!("fixtures/poolboy-1.17.3/resource-requires-claim.json"),
        &env.namespace,
    );
    let claim = objects
        .iter()
        .find(|o| o["kind"] == "ResourceClaim")
        .cloned()
        .expect("the recorded claim");
    let operator = take_over(&env, objects, WAITING_FOR_A_CLAIM_WRITES).await;
    let unbound = ["guid-c4xkx", "guid-jf5gl"].map(str::to_owned);
    assert_eq!(
        unbound_handles(&env, "rpool").await,
        BTreeSet::from(unbound.clone())
    );
    let configmaps = env.api::<ConfigMap>();
    let resources: BTreeSet<String> = configmaps
        .list(&Default::default())
        .await
        .expect("ConfigMaps")
        .into_iter()
        .map(|c| c.name_any())
        .filter(|name| name.starts_with("guid"))
        .collect();
    assert_eq!(resources, BTreeSet::from(["guid0-rqnl5".to_owned()]));

    // A claim like the recorded one binds a waiting handle, which makes its resource now.
    let mut second = json!({"apiVersion": claim["apiVersion"], "kind": "ResourceClaim",
        "metadata": {"name": "req2"}, "spec": claim["spec"]});
    second["spec"]["resources"][0]
        .as_object_mut()
        .map(|r| r.remove("provider"));
    let second: DynamicObject = serde_json::from_value(second).expect("a claim");
    let claims = api(&env, "ResourceClaim");
    claims
        .create(&PostParams::default(), &second)
        .await
        .expect("creating a claim");
    let handle = eventually("the new claim to be bound", TIMEOUT, || async {
        let bound = claims.get("req2").await.ok()?;
        Some(text(&bound.data["status"]["resourceHandle"]["name"])).filter(|h| !h.is_empty())
    })
    .await;
    assert!(unbound.contains(&handle), "{handle} is one of the pool's");
    let resource = format!("guid0-{}", handle.replace("guid-", ""));
    eventually(
        "the bound handle's resource, made for its claim",
        TIMEOUT,
        || async {
            let data = configmaps.get(&resource).await.ok()?.data?;
            (data.get("owner").map(String::as_str) == Some("req2")).then_some(())
        },
    )
    .await;
    env.teardown([operator]).await;
}

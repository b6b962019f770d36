use futures::FutureExt;
use futures::channel::mpsc;
use kube::api::ObjectMeta;
use serde_json::json;

use super::resources::ManagedResources;
use super::*;
use serde_json::Value;

struct Fixture {
    router: Router,
    handle_wakes: mpsc::UnboundedReceiver<ObjectRef<StoredHandle>>,
    claim_wakes: mpsc::UnboundedReceiver<ObjectRef<StoredClaim>>,
}

fn fixture(handles: Vec<Value>, claims: Vec<Value>) -> Fixture {
    let domain = OperatorDomain::default();
    let kinds = Kinds::new(&domain);
    let mut handle_writer = reflector::store::Writer::new(kinds.stored_handle.clone());
    for handle in handles {
        let handle: StoredHandle = serde_json::from_value(handle).expect("handle");
        handle_writer.apply_watcher_event(&Event::Apply(handle));
    }
    let mut claim_writer = reflector::store::Writer::new(kinds.stored_claim.clone());
    for claim in claims {
        let claim: StoredClaim = serde_json::from_value(claim).expect("claim");
        claim_writer.apply_watcher_event(&Event::Apply(claim));
    }
    let (claims_tx, claim_wakes) = mpsc::unbounded();
    let (handles_tx, handle_wakes) = mpsc::unbounded();
    let (pools_tx, _) = mpsc::unbounded();
    Fixture {
        router: Router {
            triggers: Triggers {
                claims: claims_tx,
                handles: handles_tx,
                pools: pools_tx,
            },
            kinds,
            handles: ListedStore::listed(handle_writer.as_reader()),
            claims: claim_writer.as_reader(),
            domain,
            operator_namespace: "poolboy".into(),
        },
        handle_wakes,
        claim_wakes,
    }
}

fn handle(name: &str, labels: Value, claim: Option<&str>) -> Value {
    let mut handle = json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceHandle",
        "metadata": {"name": name, "namespace": "poolboy", "labels": labels},
        "spec": {},
    });
    if let Some(claim) = claim {
        handle["spec"]["resourceClaim"] = json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
            "name": claim, "namespace": "user",
        });
    }
    handle
}

fn claim(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "user", "labels": labels},
        "spec": {},
    })
}

fn configmaps() -> kube::core::ApiResource {
    kube::core::ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
}

fn managed(annotations: &[(&str, &str)]) -> DynamicObject {
    named("cm", annotations)
}

fn named(name: &str, annotations: &[(&str, &str)]) -> DynamicObject {
    let mut object = DynamicObject::new(name, &configmaps());
    object.metadata = ObjectMeta {
        name: Some(name.into()),
        namespace: Some("managed".into()),
        uid: Some(format!("uid-{name}")),
        annotations: Some(
            annotations
                .iter()
                .map(|(k, v)| (format!("poolboy.gpte.redhat.com/{k}"), (*v).to_owned()))
                .collect(),
        ),
        ..Default::default()
    };
    object
}

fn drain<T>(receiver: &mut mpsc::UnboundedReceiver<T>) -> Vec<T> {
    std::iter::from_fn(|| receiver.try_recv().ok()).collect()
}

fn key(api_version: &str, kind: &str, namespace: Option<&str>) -> WatchKey {
    WatchKey {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: namespace.map(str::to_owned),
    }
}

#[test]
fn the_resource_watch_object_has_poolboys_name_and_spec() {
    let kinds = Kinds::new(&OperatorDomain::default());
    let namespaced = watch_object(
        &kinds,
        "poolboy",
        &key(
            "anarchy.gpte.redhat.com/v1",
            "AnarchySubject",
            Some("anarchy"),
        ),
    );
    let value = serde_json::to_value(&namespaced).expect("serializes");
    assert_eq!(
        value,
        json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1",
            "kind": "ResourceWatch",
            "metadata": {
                "name": resource_watch_name("anarchy.gpte.redhat.com/v1", "AnarchySubject", Some("anarchy")),
                "namespace": "poolboy",
            },
            "spec": {
                "apiVersion": "anarchy.gpte.redhat.com/v1",
                "kind": "AnarchySubject",
                "namespace": "anarchy",
            },
        })
    );
    assert!(namespaced.name_any().starts_with("anarchy-"));
    // Cluster-wide (and an empty namespace, as Python's `namespace or ''`): no spec.namespace.
    for namespace in [None, Some("")] {
        let cluster = watch_object(&kinds, "poolboy", &key("v1", "Namespace", namespace));
        assert_eq!(cluster.spec.namespace, None);
        assert_eq!(
            cluster.name_any(),
            resource_watch_name("v1", "Namespace", None)
        );
        assert!(cluster.name_any().starts_with("cluster-"));
    }
}

/// How `/readyz` and the logs name a watch.
#[test]
fn a_watch_is_named_by_kind_and_namespace() {
    assert_eq!(
        key("v1", "ConfigMap", Some("a")).to_string(),
        "v1 ConfigMap in a"
    );
    assert_eq!(key("v1", "Namespace", None).to_string(), "v1 Namespace");
}

#[test]
fn a_resource_watch_object_is_declared_once_per_key() {
    let managed = ManagedResources::default();
    let configmaps = key("v1", "ConfigMap", Some("a"));
    assert!(managed.start_declaring(&configmaps));
    // The passes managing the same kind meanwhile leave it to the first.
    assert!(!managed.start_declaring(&configmaps));
    // Another namespace or kind is another watch.
    assert!(managed.start_declaring(&key("v1", "ConfigMap", Some("b"))));
    assert!(managed.start_declaring(&key("v1", "Secret", Some("a"))));
    // A create that failed is tried again by the next pass, once.
    managed.declaring_failed(&configmaps);
    assert!(managed.start_declaring(&configmaps));
    assert!(!managed.start_declaring(&configmaps));
}

/// A watch stops once its store is empty and no reader has looked it up for the idle time;
/// one that holds an object, or that a reader looked up meanwhile, goes on; a stopped watch's
/// task is stopped with it.
#[tokio::test]
async fn an_empty_watch_no_reader_looks_up_stops() {
    let managed = ManagedResources::default();
    let mut writers = Vec::new();
    for namespace in ["deleted", "holding", "read"] {
        let writer = reflector::store::Writer::new(SharedType::new(configmaps()));
        let watch = Watch {
            resource: SharedType::new(configmaps()),
            store: ListedStore::of(&writer),
            last_read: LastRead::default(),
        };
        let key = key("v1", "ConfigMap", Some(namespace));
        assert!(managed.start_declaring(&key));
        assert!(managed.insert(key.clone(), watch));
        managed.keep_task(key, tokio::spawn(futures::future::pending()));
        writers.push(writer);
    }
    let mut packer = crate::store::packed::Packer::new(SharedType::new(configmaps()));
    let held = serde_json::from_value::<DynamicObject>(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kept", "namespace": "holding", "uid": "u1"},
    }))
    .expect("a ConfigMap");
    writers[1].apply_watcher_event(&watcher::Event::Apply(packer.pack_listed(&held)));
    let idle = Duration::from_secs(600);
    let later = std::time::Instant::now() + idle;
    assert!(
        managed
            .stop_idle(later - Duration::from_secs(1), idle)
            .is_empty(),
        "not idle yet"
    );
    let read = key("v1", "ConfigMap", Some("read"));
    assert!(managed.watch(&read).is_some());
    let stopped = managed.stop_idle(later, idle);
    assert_eq!(stopped, [key("v1", "ConfigMap", Some("deleted"))]);
    assert_eq!(managed.len(), 2);
    assert!(managed.watch(&stopped[0]).is_none());
    assert!(
        managed.start_declaring(&stopped[0]),
        "its ResourceWatch is made sure of again when it starts again"
    );
    assert!(!managed.start_declaring(&read));
    let stopped_again = managed.stop_idle(later + idle, idle);
    assert_eq!(stopped_again, [read], "empty, and no look since");
}

#[test]
fn an_event_wakes_the_handle_and_its_claim() {
    let mut f = fixture(
        vec![handle("guid-a", json!({}), Some("mine"))],
        vec![claim("mine", json!({}))],
    );
    let routed = f.router.route(
        &managed(&[
            ("resource-handle-name", "guid-a"),
            ("resource-handle-namespace", "poolboy"),
        ]),
        Claims::Wake,
    );
    assert_eq!(routed.as_deref(), Some("guid-a"));
    let handles = drain(&mut f.handle_wakes);
    assert_eq!(handles.len(), 1);
    assert_eq!(handles[0].name, "guid-a");
    let claims = drain(&mut f.claim_wakes);
    assert_eq!(claims.len(), 1);
    assert_eq!(
        (claims[0].name.as_str(), claims[0].namespace.as_deref()),
        ("mine", Some("user"))
    );
}

#[test]
fn unannotated_deleted_and_foreign_objects_are_skipped() {
    let mut f = fixture(vec![handle("guid-a", json!({}), None)], vec![]);
    assert_eq!(f.router.route(&managed(&[]), Claims::Wake), None);
    let deleted = managed(&[
        ("resource-handle-name", "guid-a"),
        ("resource-handle-deleted", "2026-01-01T00:00:00Z"),
    ]);
    assert_eq!(f.router.route(&deleted, Claims::Wake), None);
    let foreign = managed(&[
        ("resource-handle-name", "guid-a"),
        ("resource-handle-namespace", "elsewhere"),
    ]);
    assert_eq!(f.router.route(&foreign, Claims::Wake), None);
    assert!(drain(&mut f.handle_wakes).is_empty());
}

#[test]
fn ignored_handles_and_claims_are_not_woken() {
    let ignore = json!({"poolboy.gpte.redhat.com/ignore": ""});
    let mut f = fixture(
        vec![
            handle("guid-a", ignore.clone(), None),
            handle("guid-b", json!({}), Some("ignored")),
        ],
        vec![claim("ignored", ignore)],
    );
    f.router.route(
        &managed(&[("resource-handle-name", "guid-a")]),
        Claims::Wake,
    );
    assert!(drain(&mut f.handle_wakes).is_empty());
    f.router.route(
        &managed(&[("resource-handle-name", "guid-b")]),
        Claims::Wake,
    );
    assert_eq!(drain(&mut f.handle_wakes).len(), 1);
    assert!(drain(&mut f.claim_wakes).is_empty());
}

#[test]
fn a_resource_is_suspect_when_its_handle_is_missing_or_being_deleted() {
    let mut deleting = handle("guid-d", json!({}), Some("c"));
    deleting["metadata"]["deletionTimestamp"] = json!("2026-11-24T10:00:00Z");
    let f = fixture(
        vec![handle("guid-a", json!({}), Some("c")), deleting],
        vec![],
    );
    let suspect = |annotations: &[(&str, &str)]| f.router.suspect(&named("x", annotations));
    assert!(suspect(&[("resource-handle-name", "guid-a")]).is_none());
    let found = suspect(&[
        ("resource-handle-name", "guid-gone"),
        ("resource-handle-uid", "h9"),
    ])
    .expect("a suspect");
    assert_eq!(
        (found.uid.as_str(), found.handle_uid.as_deref()),
        ("uid-x", Some("h9"))
    );
    assert!(suspect(&[("resource-handle-name", "guid-d")]).is_some());
    // A namesake of the handle it was made by.
    assert!(
        suspect(&[
            ("resource-handle-name", "guid-a"),
            ("resource-handle-uid", "h0")
        ])
        .is_some()
    );
    // Being deleted by Poolboy, another operator's, or not Poolboy's at all.
    assert!(
        suspect(&[
            ("resource-handle-name", "guid-gone"),
            ("resource-handle-deleted", "2026-11-24T10:00:00Z")
        ])
        .is_none()
    );
    assert!(
        suspect(&[
            ("resource-handle-name", "guid-gone"),
            ("resource-handle-namespace", "elsewhere")
        ])
        .is_none()
    );
    assert!(suspect(&[]).is_none());
}

#[test]
fn a_handle_missing_from_the_store_is_still_woken() {
    let mut f = fixture(vec![], vec![]);
    f.router.route(
        &managed(&[("resource-handle-name", "guid-new")]),
        Claims::Wake,
    );
    assert_eq!(drain(&mut f.handle_wakes)[0].name, "guid-new");
}

#[test]
fn a_relist_wakes_the_handles_of_objects_that_vanished_meanwhile() {
    let mut f = fixture(vec![], vec![]);
    let a = named("a", &[("resource-handle-name", "guid-a")]);
    let b = named("b", &[("resource-handle-name", "guid-b")]);
    let events: Vec<Result<Event<DynamicObject>, watcher::Error>> = vec![
        Ok(Event::Init),
        Ok(Event::InitApply(a.clone())),
        Ok(Event::InitDone),
        Ok(Event::Apply(b)),
        // The watch restarts (410 Gone): b was deleted while it was down.
        Ok(Event::Init),
        Ok(Event::InitApply(a)),
        Ok(Event::InitDone),
    ];
    let writer = reflector::store::Writer::new(SharedType::new(configmaps()));
    let key = WatchKey {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("managed".into()),
    };
    let suspects = std::cell::RefCell::new(Vec::new());
    let listed = ListedStore::of(&reflector::store::Writer::new(
        SharedType::new(configmaps()),
    ));
    futures::executor::block_on(follow(
        reflect_kept(
            futures::stream::iter(events),
            writer,
            SharedType::new(configmaps()),
        ),
        f.router,
        |suspect| suspects.borrow_mut().push(suspect),
        key,
        listed.clone(),
    ));
    // Readers waiting for the first list are let through.
    assert!(listed.wait_until_listed().now_or_never().is_some());
    // Neither handle is in the store: every applied object is a suspect.
    let suspects: Vec<String> = suspects.into_inner().into_iter().map(|s| s.name).collect();
    assert_eq!(suspects, ["a", "b", "a"]);
    let woken: Vec<String> = drain(&mut f.handle_wakes)
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(woken, ["guid-a", "guid-b", "guid-a", "guid-b"]);
}

#[test]
fn resources_listed_before_the_handles_are_judged_once_the_handles_have_listed() {
    let mut f = fixture(vec![], vec![]);
    let handles = ListedStore::of(&reflector::store::Writer::new(
        f.router.kinds.stored_handle.clone(),
    ));
    f.router.handles = handles.clone();
    let a = named("a", &[("resource-handle-name", "guid-a")]);
    let events: Vec<Result<Event<DynamicObject>, watcher::Error>> = vec![
        Ok(Event::Init),
        Ok(Event::InitApply(a)),
        Ok(Event::InitDone),
    ];
    let writer = reflector::store::Writer::new(SharedType::new(configmaps()));
    let listed = ListedStore::of(&writer);
    // A watch's stream never ends.
    let stream = reflect_kept(
        futures::stream::iter(events),
        writer,
        SharedType::new(configmaps()),
    )
    .chain(futures::stream::pending());
    let suspects = std::cell::RefCell::new(Vec::new());
    let mut following = std::pin::pin!(follow(
        stream,
        f.router,
        |suspect: Suspect| suspects.borrow_mut().push(suspect.name),
        key("v1", "ConfigMap", Some("managed")),
        listed,
    ));
    assert!(following.as_mut().now_or_never().is_none());
    assert!(
        suspects.borrow().is_empty(),
        "every handle would look missing"
    );
    assert!(
        drain(&mut f.handle_wakes).is_empty(),
        "the handles' list brings guid-a to its controller"
    );
    handles.mark_listed();
    assert!(following.as_mut().now_or_never().is_none());
    assert_eq!(
        *suspects.borrow(),
        ["a"],
        "guid-a is not among the listed handles"
    );
}

/// A handle bound to claim `mine` whose status references the ConfigMap `cm`.
fn handle_of_cm() -> Value {
    let mut handle = handle("guid-a", json!({}), Some("mine"));
    handle["spec"]["resources"] = json!([{"provider": {
        "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceProvider",
        "name": "p", "namespace": "poolboy",
    }}]);
    handle["status"] = json!({"resources": [{"reference": {
        "apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "namespace": "managed",
    }}]});
    handle
}

/// Runs `follow` over `events` into the store `listed`; the claims it woke.
fn claims_woken(
    events: Vec<Event<DynamicObject>>,
    listed: ListedStore<StoredResource>,
) -> Vec<String> {
    let mut f = fixture(vec![handle_of_cm()], vec![claim("mine", json!({}))]);
    futures::executor::block_on(follow(
        futures::stream::iter(events.into_iter().map(Ok)),
        f.router,
        |_| {},
        key("v1", "ConfigMap", Some("managed")),
        listed,
    ));
    drain(&mut f.claim_wakes)
        .into_iter()
        .map(|r| r.name)
        .collect()
}

fn unlisted_configmaps() -> ListedStore<StoredResource> {
    ListedStore::of(&reflector::store::Writer::new(
        SharedType::new(configmaps()),
    ))
}

#[tokio::test]
async fn a_first_list_wakes_claims_only_when_a_reader_went_without_it() {
    let cm = || managed(&[("resource-handle-name", "guid-a")]);
    let first_list = || vec![Event::Init, Event::InitApply(cm()), Event::InitDone];
    assert!(claims_woken(first_list(), unlisted_configmaps()).is_empty());
    // A reader gave up waiting: the list is news to its claim.
    let missed = unlisted_configmaps();
    assert!(!missed.listed_within(Duration::ZERO).await);
    assert_eq!(claims_woken(first_list(), missed), ["mine"]);
    // After the first list, a re-list and a change wake the claim.
    let mut events = first_list();
    events.extend(first_list());
    events.push(Event::Apply(cm()));
    assert_eq!(
        claims_woken(events, unlisted_configmaps()),
        ["mine", "mine"]
    );
}

/// The echo of a handle's own write to a resource wakes its claim, which copies the
/// resource's state, and not the handle, which acted on it already; only when the handle's
/// status references the resource (a resource just created reaches the claim with the status
/// write that records it).
#[test]
fn an_echo_of_the_handles_write_wakes_only_the_claim_that_reads_it() {
    let mut f = fixture(vec![handle_of_cm()], vec![claim("mine", json!({}))]);
    let configmaps = key("v1", "ConfigMap", Some("managed"));
    let referenced = reference_of(&managed(&[]), &configmaps);
    f.router.wake_claim_reading("guid-a", referenced.as_ref());
    assert!(drain(&mut f.handle_wakes).is_empty());
    let claims = drain(&mut f.claim_wakes);
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].name, "mine");

    let unrecorded = reference_of(&named("new", &[]), &configmaps);
    f.router.wake_claim_reading("guid-a", unrecorded.as_ref());
    let secrets = reference_of(&managed(&[]), &key("v1", "Secret", Some("managed")));
    f.router.wake_claim_reading("guid-a", secrets.as_ref());
    f.router
        .wake_claim_reading("guid-gone", referenced.as_ref());
    assert!(drain(&mut f.handle_wakes).is_empty());
    assert!(drain(&mut f.claim_wakes).is_empty());
}

use super::*;
use crate::store::packed::StoredResource;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::ObjectMeta;
use std::sync::Mutex;

fn configmap(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("ns".to_owned()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

fn names(objects: &[ConfigMap]) -> Vec<String> {
    objects
        .iter()
        .map(|o| o.metadata.name.clone().unwrap_or_default())
        .collect()
}

/// What a store keeps of a claim is the claim, less its managedFields.
#[test]
fn a_claim_trimmed_for_the_store_loses_its_managed_fields_and_nothing_else() {
    let state = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "guid0-abcde", "labels": {"b": "1", "a": "2"}}, "data": {"k": "v"}});
    let claim = serde_json::json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns",
            "managedFields": [{"manager": "poolboy", "operation": "Update"}]},
        "spec": {"provider": {"name": "p", "parameterValues": {"z": [1, 2], "a": {"x": null}}},
            "resources": [{"name": "config", "template": {"data": {"claim": "c"}}}]},
        "status": {"summary": {"url": "u"},
            "resources": [{"name": "config", "state": state}]},
    });
    let mut trimmed: ClaimObject = serde_json::from_value(claim.clone()).expect("a claim");
    trimmed.trim_for_store();
    let mut expected = claim;
    expected["metadata"]
        .as_object_mut()
        .map(|m| m.remove("managedFields"));
    let trimmed = serde_json::to_value(&trimmed).expect("serialises");
    assert_eq!(trimmed, expected);
    assert_eq!(trimmed.to_string(), expected.to_string(), "key order kept");
}

/// One watch serves every controller: followers see every event, subscribers every touched
/// object after the first list (deleted ones too: a claim must hear its handle went), the
/// driver the applied ones, each after the store has the change (a list's objects are stored
/// together, when it is done: readers wait for the listed signal), and at a list's end the
/// whole store, which is where the objects a list brought settled reach it.
#[tokio::test]
async fn a_shared_watch_hands_each_change_to_everyone_after_the_store_has_it() {
    use watcher::Event;
    let writer = reflector::store::Writer::<ConfigMap>::default();
    let listed = ListedStore::of(&writer);
    let store = listed.store().clone();
    let followed = Arc::new(Mutex::new(Vec::new()));
    let follower: Follower<ConfigMap> = {
        let followed = followed.clone();
        let store = store.clone();
        Box::new(move |event: &Event<ConfigMap>| {
            let seen = match event {
                Event::Apply(o) | Event::InitApply(o) => {
                    format!(
                        "apply {} stored={}",
                        o.metadata.name.clone().unwrap_or_default(),
                        store.get(&reflector::ObjectRef::from_obj(o)).is_some()
                    )
                }
                Event::Delete(o) => {
                    format!(
                        "delete {} stored={}",
                        o.metadata.name.clone().unwrap_or_default(),
                        store.get(&reflector::ObjectRef::from_obj(o)).is_some()
                    )
                }
                Event::Init => "init".to_owned(),
                // A relist is stored whole once it is done.
                Event::InitDone => format!("init done stored={}", store.state().len()),
            };
            followed.lock().expect("not poisoned").push(seen);
        })
    };
    let (first, first_received) = mpsc::unbounded();
    let (second, second_received) = mpsc::unbounded();
    let events = futures::stream::iter(
        [
            Event::Init,
            Event::InitApply(configmap("a")),
            Event::InitDone,
            Event::Apply(configmap("b")),
            Event::Delete(configmap("a")),
            // A re-list: its new object that needs work goes out once the store shows it,
            // the settled one with the store at the end; "b", which it does not bring, was
            // deleted while the watch was away.
            Event::Init,
            Event::InitApply(configmap("c")),
            Event::InitApply(configmap("d")),
            Event::InitDone,
        ]
        .map(Ok),
    );
    let gate = RelistGate::new(writer.as_reader(), ());
    let settled = |object: &ConfigMap| object.name_any() != "c";
    let driven: Vec<String> = fan_out(
        events,
        Whole,
        settled,
        (writer, gate),
        vec![follower],
        listed.clone(),
        vec![first, second],
    )
    .map_ok(|applied| match applied {
        Applied::Object(object) => {
            let stored = store
                .get(&reflector::ObjectRef::from_obj(&object))
                .is_some();
            format!("{} stored={stored}", object.name_any())
        }
        Applied::Listed(objects) => {
            let mut listed: Vec<String> = objects.iter().map(|o| o.name_any()).collect();
            listed.sort();
            format!("listed {}", listed.join(" "))
        }
    })
    .try_collect()
    .await
    .expect("no watch error");
    assert_eq!(
        driven,
        ["listed a", "b stored=true", "c stored=true", "listed c d"],
        "a settled object listed, a change, a re-listed one that needs work, the re-list"
    );
    for received in [first_received, second_received] {
        let received: Vec<ConfigMap> = received.collect().await;
        assert_eq!(
            names(&received),
            ["b", "a", "c", "d", "b"],
            "not the first list"
        );
    }
    assert_eq!(
        *followed.lock().expect("not poisoned"),
        [
            "init",
            "apply a stored=false",
            "init done stored=1",
            "apply b stored=true",
            "delete a stored=false",
            "init",
            "apply c stored=false",
            "apply d stored=false",
            "delete b stored=true",
            "init done stored=2",
        ]
    );
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        listed.wait_until_listed(),
    )
    .await
    .expect("listed once InitDone went by");
}

/// A re-list tells followers and subscribers of each object it does not bring back, by uid:
/// one deleted and created again under its name while the watch was away is told deleted as
/// the store had it, beside the new one; followers hear it before the store and the indices
/// rebuilt from the re-list forget it, subscribers once the store no longer shows it. A
/// follower of deletes hears those and the deletes the watch told, nothing else.
#[tokio::test]
async fn a_relist_tells_of_the_objects_deleted_while_the_watch_was_away() {
    use watcher::Event;
    let writer = reflector::store::Writer::<ConfigMap>::default();
    let listed = ListedStore::of(&writer);
    let store = listed.store().clone();
    let mut created_again = configmap("a");
    created_again.metadata.uid = Some("uid-a-again".to_owned());
    let followed = Arc::new(Mutex::new(Vec::new()));
    let follower: Follower<ConfigMap> = {
        let (followed, store) = (followed.clone(), store.clone());
        Box::new(deletes_only(move |o: &ConfigMap| {
            let stored = store
                .state()
                .iter()
                .any(|s| s.metadata.uid == o.metadata.uid);
            let seen = format!(
                "delete {} stored={stored}",
                ResourceExt::uid(o).unwrap_or_default()
            );
            followed.lock().expect("not poisoned").push(seen);
        }))
    };
    let (subscriber, received) = mpsc::unbounded();
    let events = futures::stream::iter(
        [
            Event::Init,
            Event::InitApply(configmap("a")),
            Event::InitApply(configmap("b")),
            Event::InitApply(configmap("c")),
            Event::InitDone,
            Event::Apply(configmap("d")),
            Event::Delete(configmap("d")),
            Event::Init,
            Event::InitApply(created_again),
            Event::InitApply(configmap("c")),
            Event::InitDone,
        ]
        .map(Ok),
    );
    let gate = RelistGate::new(writer.as_reader(), ());
    fan_out(
        events,
        Whole,
        |_| true,
        (writer, gate),
        vec![follower],
        listed,
        vec![subscriber],
    )
    .try_collect::<Vec<_>>()
    .await
    .expect("no watch error");
    // The store's order, not the list's.
    let mut deletes = followed.lock().expect("not poisoned").clone();
    deletes[1..].sort();
    assert_eq!(
        deletes,
        [
            "delete uid-d stored=false",
            "delete uid-a stored=true",
            "delete uid-b stored=true"
        ],
        "deletes only, as they came and as the re-list found them"
    );
    let received: Vec<ConfigMap> = received.collect().await;
    let mut uids: Vec<String> = received
        .iter()
        .map(|o| ResourceExt::uid(o).unwrap_or_default())
        .collect();
    uids[4..].sort();
    assert_eq!(
        uids,
        ["uid-d", "uid-d", "uid-a-again", "uid-c", "uid-a", "uid-b"]
    );
    let mut kept: Vec<String> = store
        .state()
        .iter()
        .map(|o| ResourceExt::uid(o.as_ref()).unwrap_or_default())
        .collect();
    kept.sort();
    assert_eq!(kept, ["uid-a-again", "uid-c"]);
}

/// A first list is not followed: nothing can vanish from an empty store, and a start over many
/// objects keeps no uids aside for it.
#[test]
fn the_first_list_keeps_no_uids_aside() {
    let mut writer = reflector::store::Writer::<ConfigMap>::default();
    let mut vanished = Vanished::new(writer.as_reader());
    for event in [
        watcher::Event::Init,
        watcher::Event::InitApply(configmap("a")),
    ] {
        assert!(vanished.follow(&event).is_empty());
        assert!(vanished.relisted.is_none());
        writer.apply_watcher_event(&event);
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    vanished.follow(&watcher::Event::Init);
    assert!(vanished.relisted.is_some(), "a re-list is followed");
}

/// A controller's own watch of a kind it alone follows: each event once the store has it, and
/// at a re-list's end a delete event of each object the re-list did not bring back (the same
/// name created again while the watch was away is another object), once the store no longer
/// shows it.
#[tokio::test]
async fn a_watch_reflected_whole_tells_of_the_objects_deleted_while_it_was_away() {
    use watcher::Event;
    let writer = reflector::store::Writer::<ConfigMap>::default();
    let store = writer.as_reader();
    let created_again = ConfigMap {
        metadata: ObjectMeta {
            uid: Some("uid-a-again".to_owned()),
            ..configmap("a").metadata
        },
        ..ConfigMap::default()
    };
    let events = futures::stream::iter(
        [
            Event::Init,
            Event::InitApply(configmap("a")),
            Event::InitApply(configmap("b")),
            Event::InitDone,
            Event::Init,
            Event::InitApply(created_again),
            Event::InitDone,
        ]
        .map(Ok),
    );
    let stored = || {
        let mut uids: Vec<String> = store
            .state()
            .iter()
            .filter_map(|o| ResourceExt::uid(o.as_ref()))
            .collect();
        uids.sort();
        uids
    };
    let (mut seen, mut deleted) = (Vec::new(), Vec::new());
    let mut reflected = std::pin::pin!(reflect_whole(events, writer));
    while let Some(event) = reflected.next().await {
        match event.expect("no watch error") {
            Event::Delete(o) => {
                let uid = ResourceExt::uid(&o).unwrap_or_default();
                deleted.push(format!("{uid} stored={:?}", stored()));
            }
            Event::InitDone => seen.push(format!("init done stored={:?}", stored())),
            _ => {}
        }
        if !deleted.is_empty() {
            seen.push(format!("{} deleted", deleted.len()));
        }
    }
    // The re-list's deletes come after its end, in no particular order.
    deleted.sort();
    assert_eq!(
        seen,
        [
            r#"init done stored=["uid-a", "uid-b"]"#,
            r#"init done stored=["uid-a-again"]"#,
            "1 deleted",
            "2 deleted",
        ]
    );
    assert_eq!(
        deleted,
        [
            r#"uid-a stored=["uid-a-again"]"#,
            r#"uid-b stored=["uid-a-again"]"#,
        ]
    );
}

/// A packed store keeps a list's objects compressed and its watch's newest changes plain,
/// compressing the older ones as newer ones come; each reads back as it came.
#[tokio::test]
async fn a_packed_store_compresses_older_changes_as_newer_ones_come() {
    use watcher::Event;
    let resource = kube::core::ApiResource::erase::<ConfigMap>(&());
    let object = |i: usize| {
        let mut object = DynamicObject::new(&format!("o{i}"), &resource).within("ns");
        object.metadata.uid = Some(format!("uid-{i}"));
        object.data = serde_json::json!({"data": {"k": format!("{i}: {}", "x".repeat(1000))}});
        object
    };
    let kept = SharedType::new(resource.clone());
    let writer = reflector::store::Writer::<StoredResource>::new(kept.clone());
    let store = writer.as_reader();
    let changes = 200;
    let events = [Event::Init, Event::InitApply(object(0)), Event::InitDone]
        .into_iter()
        .chain((1..=changes).map(|i| Event::Apply(object(i))))
        .map(Ok);
    let reflected = reflect_kept(futures::stream::iter(events), writer, kept.clone());
    assert_eq!(
        reflected.count().await,
        changes + 3,
        "every event handed on"
    );
    let plain: Vec<bool> = (0..=changes)
        .map(|i| {
            let key = reflector::ObjectRef::new_with(&format!("o{i}"), kept.clone()).within("ns");
            let packed = store.get(&key).expect("stored");
            assert_eq!(
                serde_json::to_value(packed.unpack().expect("unpacks")).expect("serialises"),
                serde_json::to_value(object(i)).expect("serialises")
            );
            packed.is_plain()
        })
        .collect();
    assert!(!plain[0], "listed: compressed");
    assert!(!plain[1], "the oldest change: compressed");
    assert!(plain[changes], "the newest change: plain");
    let oldest_plain = plain.iter().position(|plain| *plain).expect("some plain");
    assert!(
        plain[oldest_plain..].iter().all(|plain| *plain),
        "plain from the oldest plain one on: {plain:?}"
    );
}

/// A managed-resource watch: its follower gets every event as it came, once the store
/// holds the object packed (and no longer holds a deleted one), and after a re-list a delete
/// event of each object it did not bring back.
#[tokio::test]
async fn a_watch_reflected_packed_hands_on_each_event_after_the_store_has_it() {
    use watcher::Event;
    let resource = kube::core::ApiResource::erase::<ConfigMap>(&());
    let object = |name: &str, value: &str| {
        let mut object = DynamicObject::new(name, &resource).within("ns");
        object.metadata.uid = Some(format!("uid-{name}"));
        object.data = serde_json::json!({"data": {"k": value}});
        object
    };
    let kept = SharedType::new(resource.clone());
    let writer = reflector::store::Writer::<StoredResource>::new(kept.clone());
    let store = writer.as_reader();
    let stored = |name: &str| {
        let key = reflector::ObjectRef::new_with(name, kept.clone()).within("ns");
        store
            .get(&key)
            .map(|packed| packed.unpack().expect("unpacks").data["data"]["k"].clone())
    };
    let events = futures::stream::iter(
        [
            Event::Init,
            Event::InitApply(object("a", "1")),
            Event::InitDone,
            Event::Apply(object("a", "2")),
            Event::Delete(object("a", "2")),
            Event::Apply(object("b", "1")),
            // A re-list: "b" was deleted while the watch was away.
            Event::Init,
            Event::InitDone,
        ]
        .map(Ok),
    );
    let mut seen = Vec::new();
    let mut reflected = std::pin::pin!(reflect_kept(events, writer, kept.clone()));
    while let Some(event) = reflected.next().await {
        seen.push(match event.expect("no watch error") {
            Event::InitApply(o) | Event::Apply(o) => {
                format!(
                    "apply {} {} stored={:?}",
                    o.name_any(),
                    o.data["data"]["k"],
                    stored(&o.name_any())
                )
            }
            Event::Delete(o) => {
                format!("delete {} stored={:?}", o.name_any(), stored(&o.name_any()))
            }
            Event::Init => "init".to_owned(),
            Event::InitDone => format!("init done stored={:?}", stored("a")),
        });
    }
    assert_eq!(
        seen,
        [
            "init",
            r#"apply a "1" stored=None"#,
            r#"init done stored=Some(String("1"))"#,
            r#"apply a "2" stored=Some(String("2"))"#,
            "delete a stored=None",
            r#"apply b "1" stored=Some(String("1"))"#,
            "init",
            "init done stored=None",
            "delete b stored=None",
        ]
    );
}

#[tokio::test]
async fn every_concurrent_waiter_learns_that_the_store_is_listed() {
    let writer = reflector::store::Writer::<ConfigMap>::default();
    let listed = ListedStore::of(&writer);
    let waiters: Vec<_> = (0..8)
        .map(|_| {
            let listed = listed.clone();
            tokio::spawn(async move { listed.wait_until_listed().await })
        })
        .collect();
    listed.mark_listed();
    for waiter in waiters {
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("no waiter hangs")
            .expect("the waiter ran");
    }
}

/// A reader of an object the store lacks before its first list waits for the list, and finds
/// the object there.
#[tokio::test]
async fn a_reader_waits_for_the_first_list_rather_than_go_without() {
    let mut writer = reflector::store::Writer::<ConfigMap>::default();
    let listed = ListedStore::of(&writer);
    let key = ObjectRef::from_obj(&configmap("a"));
    let reader = {
        let listed = listed.clone();
        tokio::spawn(async move { listed.get_once_listed(&key, Duration::from_secs(60)).await })
    };
    tokio::task::yield_now().await;
    assert!(!reader.is_finished(), "the reader waits for the list");
    writer.apply_watcher_event(&watcher::Event::InitApply(configmap("a")));
    writer.apply_watcher_event(&watcher::Event::InitDone);
    listed.mark_listed();
    let found = tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .expect("the list ends the wait")
        .expect("the reader ran");
    assert_eq!(found.map(|o| o.name_any()).as_deref(), Some("a"));
}

/// Once listed, a store that lacks an object says so at once; one that never lists keeps one
/// reader waiting for `wait`, and no reader after it.
#[tokio::test]
async fn only_one_reader_waits_for_a_list_that_does_not_come() {
    let writer = reflector::store::Writer::<ConfigMap>::default();
    let listed = ListedStore::of(&writer);
    let key = ObjectRef::from_obj(&configmap("a"));
    let long = Duration::from_secs(60);
    let at_once = |reader| tokio::time::timeout(Duration::from_secs(5), reader);

    let wait = Duration::from_millis(100);
    let start = std::time::Instant::now();
    assert!(listed.get_once_listed(&key, wait).await.is_none());
    assert!(start.elapsed() >= wait, "the first reader waits");
    let again = at_once(listed.get_once_listed(&key, long)).await;
    assert!(again.expect("no reader waits again").is_none());

    let other = ListedStore::of(&reflector::store::Writer::<ConfigMap>::default());
    other.mark_listed();
    let found = at_once(other.get_once_listed(&key, long)).await;
    assert!(found.expect("a listed store is not waited for").is_none());
}

/// A reader that goes without the first list is either seen by the list, whose lister is told
/// so, or sees it.
#[tokio::test]
async fn a_reader_that_went_without_the_first_list_is_seen_by_it_or_sees_it() {
    let seen = ListedStore::of(&reflector::store::Writer::<ConfigMap>::default());
    assert!(!seen.listed_within(Duration::ZERO).await);
    assert!(seen.mark_listed(), "the lister hears of the reader");
    assert!(seen.listed_within(Duration::from_secs(60)).await);

    let late = ListedStore::of(&reflector::store::Writer::<ConfigMap>::default());
    assert!(!late.mark_listed(), "no reader went without it");
    assert!(late.listed_within(Duration::ZERO).await);
    assert!(
        !late.mark_listed(),
        "a listed store's reader misses nothing"
    );
}

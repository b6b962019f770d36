use kube::core::{DynamicObject, Object, ObjectList, WatchEvent};
use proptest::prelude::*;
use serde_json::json;

use super::depth::{self, Segment};
use super::request::CollectionRead;
use super::*;
use crate::api::claim::{ResourceClaimSpec, ResourceClaimStatus};
use crate::api::handle::{ResourceHandleSpec, ResourceHandleStatus};
use crate::api::pool::{ResourcePoolSpec, ResourcePoolStatus};
use crate::api::provider::{ResourceProviderSpec, ResourceProviderStatus};
use crate::api::scaling::{ResourcePoolScalingSpec, ResourcePoolScalingStatus};
use crate::api::watch::{ResourceWatchSpec, ResourceWatchStatus};

type Claim = Object<ResourceClaimSpec, ResourceClaimStatus>;

fn claims() -> Option<TypedDecode> {
    Some(TypedDecode::of::<Claim>())
}

/// `{"a":{"a":…{"a":1}…}}`, `levels` objects deep, as text (no `Value` is ever that deep).
fn nested(levels: usize) -> String {
    let mut text = String::with_capacity(levels * 6 + 1);
    for _ in 0..levels {
        text.push_str(r#"{"a":"#);
    }
    text.push('1');
    text.push_str(&"}".repeat(levels));
    text
}

/// A claim whose first resource's template nests to a total object depth of `depth`.
fn claim(name: &str, depth: usize) -> String {
    // object > spec > resources > [0] > template: the template value starts at level 5.
    let template = nested(depth.saturating_sub(4).max(1));
    format!(
        r#"{{"apiVersion":"poolboy.gpte.redhat.com/v1","kind":"ResourceClaim","metadata":{{"name":"{name}","namespace":"ns","uid":"uid-{name}","resourceVersion":"7","generation":2}},"spec":{{"resources":[{{"template":{template}}}]}},"status":{{"conditions":[{{"type":"Bound","status":"False","reason":"Waiting","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}}]}}}}"#
    )
}

fn list_of(items: &[String]) -> String {
    format!(
        r#"{{"apiVersion":"poolboy.gpte.redhat.com/v1","items":[{}],"kind":"ResourceClaimList","metadata":{{"resourceVersion":"42"}}}}"#,
        items.join(",")
    )
}

fn set_aside(seen: &[Seen]) -> Vec<&SetAside> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::SetAside(s) => Some(s),
            _ => None,
        })
        .collect()
}

#[test]
fn depth_counts_containers_not_brackets_in_strings() {
    assert!(!depth::exceeds(b"1", 0));
    assert!(depth::exceeds(b"{}", 0));
    assert!(!depth::exceeds(b"{}", 1));
    assert!(depth::exceeds(br#"{"a":[1]}"#, 1));
    assert!(!depth::exceeds(br#"{"a":[1]}"#, 2));
    assert!(!depth::exceeds(br#"{"[[[[\"{{{":"]]]\\"}"#, 1));
}

#[test]
fn claim_helper_builds_the_depth_it_says() {
    for depth in [5, 6, 125, 126, 300] {
        let text = claim("c", depth);
        assert!(!depth::exceeds(text.as_bytes(), depth), "{depth}");
        assert!(depth::exceeds(text.as_bytes(), depth - 1), "{depth}");
    }
}

/// The bound leaves exactly the room kube's envelopes need: an object at the bound decodes in
/// a LIST and in a WATCH event; one level more fails the LIST.
#[test]
fn the_depth_bound_fits_kubes_envelopes() {
    let at_bound = claim("c", MAX_OBJECT_DEPTH);
    let past_bound = claim("c", MAX_OBJECT_DEPTH + 1);
    let list = |item: &str| format!(r#"{{"metadata":{{}},"items":[{item}]}}"#);
    let event = |item: &str| format!(r#"{{"type":"ADDED","object":{item}}}"#);
    serde_json::from_str::<ObjectList<Claim>>(&list(&at_bound)).expect("decodes at the bound");
    serde_json::from_str::<ObjectList<DynamicObject>>(&list(&at_bound)).expect("decodes");
    serde_json::from_str::<WatchEvent<Claim>>(&event(&at_bound)).expect("decodes");
    serde_json::from_str::<WatchEvent<DynamicObject>>(&event(&at_bound)).expect("decodes");
    let error = serde_json::from_str::<ObjectList<DynamicObject>>(&list(&past_bound))
        .expect_err("one level more fails the list");
    assert!(error.to_string().contains("recursion limit"), "{error}");
}

#[test]
fn a_list_of_decodable_items_passes_untouched() {
    let body = list_of(&[claim("a", 10), claim("b", MAX_OBJECT_DEPTH)]);
    let screen = screen_list(&body, claims(), false).expect("a list");
    assert!(screen.body.is_none());
    assert!(screen.seen.is_empty());
    let screen = screen_list(&body, claims(), true).expect("a list");
    assert_eq!(
        screen.seen,
        ["a", "b"].map(|name| Seen::Decodable(ObjectName {
            namespace: Some("ns".to_owned()),
            name: name.to_owned(),
        }))
    );
}

#[test]
fn a_too_deep_item_is_removed_from_its_list_and_reported_with_its_path() {
    let body = list_of(&[
        claim("a", 10),
        claim("deep", MAX_OBJECT_DEPTH + 1),
        claim("c", 10),
    ]);
    let screen = screen_list(&body, None, false).expect("a list");
    let rewritten = screen.body.expect("rewritten");
    let list: ObjectList<Claim> = serde_json::from_str(&rewritten).expect("decodes");
    let names: Vec<_> = list.items.iter().map(|c| c.metadata.name.clone()).collect();
    assert_eq!(names, [Some("a".to_owned()), Some("c".to_owned())]);
    assert_eq!(list.metadata.resource_version.as_deref(), Some("42"));
    let [deep] = set_aside(&screen.seen)[..] else {
        panic!("{:?}", screen.seen)
    };
    assert_eq!(deep.kind, "ResourceClaim");
    assert_eq!(deep.api_version, "poolboy.gpte.redhat.com/v1");
    assert_eq!(
        deep.object,
        ObjectName {
            namespace: Some("ns".to_owned()),
            name: "deep".to_owned()
        }
    );
    assert_eq!(deep.uid.as_deref(), Some("uid-deep"));
    assert_eq!(deep.resource_version.as_deref(), Some("7"));
    assert_eq!(deep.generation, Some(2));
    assert_eq!(deep.conditions.len(), 1);
    assert!(
        deep.problem.starts_with(&format!(
            "JSON nested deeper than {MAX_OBJECT_DEPTH} levels at /spec/resources/0/template/a/a/"
        )),
        "{}",
        deep.problem
    );
    assert!(deep.problem.ends_with("/…"), "{}", deep.problem);
}

#[test]
fn an_item_with_a_wrong_type_is_set_aside_with_serdes_message_and_its_path() {
    let wrong = r#"{"apiVersion":"poolboy.gpte.redhat.com/v1","kind":"ResourceClaim","metadata":{"name":"wrong","namespace":"ns"},"spec":{"resources":[{"provider":{"name":7}}]}}"#;
    let body = list_of(&[claim("a", 10), wrong.to_owned()]);
    let screen = screen_list(&body, claims(), false).expect("a list");
    let [wrong] = set_aside(&screen.seen)[..] else {
        panic!("{:?}", screen.seen)
    };
    assert_eq!(wrong.object.name, "wrong");
    assert_eq!(
        wrong.problem,
        "invalid type: integer `7`, expected a string at /spec/resources/0/provider/name"
    );
    // The same item, untyped (a managed resource), is fine.
    let screen = screen_list(&body, None, false).expect("a list");
    assert!(screen.body.is_none());
}

/// The trial reads spec and status as kube's decode of the kind does: an object with metadata
/// as the API server writes it passes exactly when kube decodes it.
#[test]
fn the_trial_passes_what_kubes_decode_of_the_kind_passes() {
    let head = r#""apiVersion":"poolboy.gpte.redhat.com/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns","uid":"u","resourceVersion":"7","labels":{"a":"b"}}"#;
    let bodies = [
        r#""spec":{}"#,
        r#""spec":{},"status":{}"#,
        r#""spec":{},"status":null"#,
        r#""spec":{"resources":[{"template":{"any":[1,{"thing":null}]}}]}"#,
        r#""spec":{"resources":[{"provider":{"name":7}}]}"#,
        r#""spec":{},"status":{"conditions":"none"}"#,
        r#""spec":{},"status":7"#,
        r#""spec":null"#,
        r#""status":{}"#,
        r#""spec":{},"unknown":{"member":1}"#,
    ];
    let mut outcomes = Vec::new();
    for body in bodies {
        let object = format!("{{{head},{body}}}");
        let kube_decodes = serde_json::from_str::<Claim>(&object).is_ok();
        let passes = problem(&object, claims()).is_none();
        assert_eq!(passes, kube_decodes, "{object}");
        outcomes.push(kube_decodes);
    }
    // Both outcomes are among them.
    assert!(outcomes.contains(&true) && outcomes.contains(&false));
}

#[test]
fn a_body_that_is_not_a_list_is_left_alone() {
    assert!(screen_list(&claim("a", 10), claims(), false).is_none());
    assert!(screen_list("not json", claims(), false).is_none());
    assert!(screen_list(r#"{"kind":"Status","code":500}"#, claims(), false).is_none());
}

#[test]
fn decodable_events_bookmarks_and_errors_pass() {
    let added = format!(r#"{{"type":"ADDED","object":{}}}"#, claim("a", 10));
    let screen = screen_event(&added, claims(), true);
    assert_eq!(screen.line, Line::Keep);
    assert!(matches!(screen.seen, Some(Seen::Decodable(ref n)) if n.name == "a"));
    for line in [
        r#"{"type":"BOOKMARK","object":{"kind":"ResourceClaim","apiVersion":"poolboy.gpte.redhat.com/v1","metadata":{"resourceVersion":"12"}}}"#,
        r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":410,"reason":"Expired"}}"#,
        "",
        "{partial",
    ] {
        let screen = screen_event(line, claims(), true);
        assert_eq!(screen.line, Line::Keep, "{line}");
        assert!(screen.seen.is_none(), "{line}");
    }
}

fn tombstone_of(line: &Line) -> Claim {
    let Line::Replace(line) = line else {
        panic!("not replaced: {line:?}")
    };
    assert!(line.ends_with('\n'));
    match serde_json::from_str::<WatchEvent<Claim>>(line).expect("the tombstone decodes") {
        WatchEvent::Deleted(claim) => claim,
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_undecodable_object_in_an_event_becomes_a_deleted_tombstone() {
    for type_ in ["ADDED", "MODIFIED"] {
        let line = format!(r#"{{"type":"{type_}","object":{}}}"#, claim("deep", 300));
        let screen = screen_event(&line, claims(), false);
        let tombstone = tombstone_of(&screen.line);
        assert_eq!(tombstone.metadata.name.as_deref(), Some("deep"));
        assert_eq!(tombstone.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(tombstone.metadata.uid.as_deref(), Some("uid-deep"));
        assert_eq!(tombstone.spec, ResourceClaimSpec::default());
        assert!(tombstone.status.is_none());
        assert!(matches!(screen.seen, Some(Seen::SetAside(ref s)) if s.object.name == "deep"));
    }
    let line = format!(r#"{{"type":"DELETED","object":{}}}"#, claim("deep", 300));
    let screen = screen_event(&line, claims(), false);
    assert_eq!(
        tombstone_of(&screen.line).metadata.name.as_deref(),
        Some("deep")
    );
    assert!(matches!(screen.seen, Some(Seen::Gone(ref n)) if n.name == "deep"));
}

#[test]
fn a_tombstone_leaves_out_managed_fields_that_nest_as_deep_as_the_object() {
    let fields = nested(400);
    let object = format!(
        r#"{{"apiVersion":"v1","kind":"AnarchySubject","metadata":{{"name":"s","namespace":"ns","labels":{{"x":"y"}},"managedFields":[{{"manager":"m","fieldsV1":{fields}}}]}},"spec":{fields}}}"#
    );
    let screen = screen_event(
        &format!(r#"{{"type":"MODIFIED","object":{object}}}"#),
        None,
        false,
    );
    let Line::Replace(line) = &screen.line else {
        panic!("{:?}", screen.line)
    };
    let WatchEvent::Deleted(tombstone) =
        serde_json::from_str::<WatchEvent<DynamicObject>>(line).expect("decodes")
    else {
        panic!("{line}")
    };
    assert_eq!(
        tombstone.metadata.labels,
        Some([("x".into(), "y".into())].into())
    );
    assert!(tombstone.metadata.managed_fields.is_none());
    // The report names the user's own nesting, not the API server's copy of it.
    let Some(Seen::SetAside(set_aside)) = screen.seen else {
        panic!("{:?}", screen.seen)
    };
    assert!(
        set_aside.problem.contains(" at /spec/a/a/"),
        "{}",
        set_aside.problem
    );
}

#[test]
fn every_kind_of_the_broker_has_a_decodable_tombstone() {
    fn check<K: ObjectType>(kind: &str) {
        let line = format!(
            r#"{{"type":"MODIFIED","object":{{"apiVersion":"poolboy.gpte.redhat.com/v1","kind":"{kind}","metadata":{{"name":"x","namespace":"ns"}},"spec":{}}}}}"#,
            nested(200)
        );
        let screen = screen_event(&line, Some(TypedDecode::of::<K>()), false);
        let Line::Replace(line) = screen.line else {
            panic!("{kind}: {:?}", screen.line)
        };
        serde_json::from_str::<WatchEvent<K>>(&line).expect(kind);
    }
    check::<Claim>("ResourceClaim");
    check::<Object<ResourceHandleSpec, ResourceHandleStatus>>("ResourceHandle");
    check::<Object<ResourcePoolSpec, ResourcePoolStatus>>("ResourcePool");
    check::<Object<ResourceProviderSpec, ResourceProviderStatus>>("ResourceProvider");
    check::<Object<ResourcePoolScalingSpec, ResourcePoolScalingStatus>>("ResourcePoolScaling");
    check::<Object<ResourceWatchSpec, ResourceWatchStatus>>("ResourceWatch");
}

/// The API server accepts 10,000 levels. On a thread whose stack could not hold a recursive
/// descent of that depth (serde_json's own parser needs far more than 256 KiB for it), the
/// screening reads, reports and replaces such objects.
#[test]
fn objects_10000_levels_deep_are_screened_on_a_small_stack() {
    let screened = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let deep = claim("deep", 10_000);
            let body = list_of(&[claim("a", 10), deep.clone()]);
            let list = screen_list(&body, claims(), true).expect("a list");
            let event = screen_event(
                &format!(r#"{{"type":"MODIFIED","object":{deep}}}"#),
                claims(),
                true,
            );
            let path = depth::too_deep_at(deep.as_bytes(), 9_000).expect("too deep");
            (list, event, path.len())
        })
        .expect("a thread")
        .join()
        .expect("no overflow");
    let (list, event, path_length) = screened;
    assert_eq!(set_aside(&list.seen).len(), 1);
    assert!(matches!(list.seen[0], Seen::Decodable(ref n) if n.name == "a"));
    assert_eq!(
        tombstone_of(&event.line).metadata.name.as_deref(),
        Some("deep")
    );
    assert_eq!(path_length, 9_000);
}

#[test]
fn paths_are_json_pointers() {
    let path = [
        Segment::Key("a/b".to_owned()),
        Segment::Key("c~d".to_owned()),
        Segment::Index(3),
    ];
    assert_eq!(depth::pointer(&path, 5), "/a~1b/c~0d/3");
    assert_eq!(depth::pointer(&path, 2), "/a~1b/c~0d/…");
    assert_eq!(depth::pointer(&[], 2), "/");
    let text = br#"{"x":[0,{"y":"z"}],"w":1}"#;
    let at = text.iter().position(|b| *b == b'z').expect("z");
    assert_eq!(
        depth::path_at(text, at),
        [
            Segment::Key("x".to_owned()),
            Segment::Index(1),
            Segment::Key("y".to_owned())
        ]
    );
}

#[test]
fn collection_reads_are_recognised_by_their_path() {
    let read = |path: &str, query: Option<&str>| CollectionRead::of_get(path, query);
    let claims = read(
        "/apis/poolboy.gpte.redhat.com/v1/namespaces/ns/resourceclaims",
        Some("limit=500&watch=true&resourceVersion=1"),
    )
    .expect("a collection");
    assert_eq!(
        claims,
        CollectionRead {
            group: "poolboy.gpte.redhat.com".to_owned(),
            version: "v1".to_owned(),
            plural: "resourceclaims".to_owned(),
            namespace: Some("ns".to_owned()),
            watch: true,
            selective: false,
            continued: false,
            metadata_only: false,
        }
    );
    let all = read("/api/v1/configmaps", Some("labelSelector=a%3Db")).expect("a collection");
    assert_eq!(
        (all.group.as_str(), all.namespace, all.watch),
        ("", None, false)
    );
    assert!(all.selective);
    assert!(read("/api/v1/namespaces", None).is_some());
    for single in [
        "/api/v1/namespaces/ns",
        "/api/v1/namespaces/ns/status",
        "/api/v1/namespaces/ns/configmaps/one",
        "/apis/poolboy.gpte.redhat.com/v1/namespaces/ns/resourceclaims/c/status",
        "/apis/poolboy.gpte.redhat.com/v1",
        "/apis",
        "/version",
    ] {
        assert_eq!(read(single, None), None, "{single}");
    }
}

/// A JSON text of random shape (keys and strings full of brackets and escapes) and its
/// depth, computed on the tree that printed it.
fn json_text() -> impl Strategy<Value = (String, usize)> {
    let string = "[\\[\\]{}\"\\\\a-z,:]{0,6}";
    let leaf = prop_oneof![
        Just(("1".to_owned(), 0)),
        Just(("null".to_owned(), 0)),
        string.prop_map(|s| (serde_json::to_string(&s).expect("a string"), 0)),
    ];
    leaf.prop_recursive(12, 64, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|items| {
                let depth = 1 + items.iter().map(|(_, d)| *d).max().unwrap_or(0);
                let texts: Vec<_> = items.into_iter().map(|(t, _)| t).collect();
                (format!("[{}]", texts.join(",")), depth)
            }),
            prop::collection::vec((string, inner), 0..4).prop_map(|members| {
                let depth = 1 + members.iter().map(|(_, (_, d))| *d).max().unwrap_or(0);
                let texts: Vec<_> = members
                    .into_iter()
                    .map(|(k, (t, _))| format!("{}:{t}", serde_json::to_string(&k).expect("key")))
                    .collect();
                (format!("{{{}}}", texts.join(",")), depth)
            }),
        ]
    })
}

proptest! {
    #[test]
    fn depth_matches_the_tree((text, depth) in json_text()) {
        prop_assert!(!depth::exceeds(text.as_bytes(), depth));
        prop_assert_eq!(depth::exceeds(text.as_bytes(), depth.saturating_sub(1)), depth > 0);
    }

    /// Whatever the mix, the list keeps exactly its decodable items, in order, and what it
    /// gives kube decodes.
    #[test]
    fn a_screened_list_keeps_exactly_the_decodable_items(
        depths in prop::collection::vec(prop_oneof![5usize..=MAX_OBJECT_DEPTH, 126usize..400], 0..6)
    ) {
        let items: Vec<String> = depths
            .iter()
            .enumerate()
            .map(|(i, depth)| claim(&format!("c{i}"), *depth))
            .collect();
        let body = list_of(&items);
        let screen = screen_list(&body, claims(), false).expect("a list");
        let expected: Vec<String> = depths
            .iter()
            .enumerate()
            .filter(|(_, depth)| **depth <= MAX_OBJECT_DEPTH)
            .map(|(i, _)| format!("c{i}"))
            .collect();
        let decoded: ObjectList<Claim> =
            serde_json::from_str(screen.body.as_deref().unwrap_or(&body)).expect("decodes");
        let names: Vec<String> = decoded.items.iter().filter_map(|c| c.metadata.name.clone()).collect();
        prop_assert_eq!(names, expected);
        prop_assert_eq!(set_aside(&screen.seen).len(), depths.iter().filter(|d| **d > MAX_OBJECT_DEPTH).count());
        prop_assert_eq!(screen.body.is_none(), depths.iter().all(|d| *d <= MAX_OBJECT_DEPTH));
    }
}

#[test]
fn a_list_keeps_its_other_members_in_order() {
    let body = list_of(&[claim("deep", 200)]);
    let screen = screen_list(&body, None, false).expect("a list");
    assert_eq!(
        screen.body.as_deref(),
        Some(
            r#"{"apiVersion":"poolboy.gpte.redhat.com/v1","items":[],"kind":"ResourceClaimList","metadata":{"resourceVersion":"42"}}"#
        )
    );
    let value: serde_json::Value =
        serde_json::from_str(screen.body.as_deref().unwrap_or_default()).expect("JSON");
    assert_eq!(value["items"], json!([]));
}

/// A claim as the API server sends it: `metadata.managedFields` mirror the fields each client
/// set, `extra` levels deeper than the claim itself.
fn claim_with_managed_fields(name: &str, extra: usize) -> String {
    let fields = format!(r#"{{"f:spec":{{"f:resources":{}}}}}"#, nested(extra.max(1)));
    format!(
        r#"{{"apiVersion":"poolboy.gpte.redhat.com/v1","kind":"ResourceClaim","metadata":{{"name":"{name}","namespace":"ns","uid":"uid-{name}","managedFields":[{{"manager":"kubectl","operation":"Update","apiVersion":"poolboy.gpte.redhat.com/v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{fields}}}],"resourceVersion":"7","labels":{{"a":"b"}}}},"spec":{{"resources":[{{"provider":{{"name":"p"}}}}]}}}}"#
    )
}

/// `object` as JSON, without `metadata.managedFields`.
fn value_without_managed_fields(object: &str) -> serde_json::Value {
    let mut value: serde_json::Value = serde_json::from_str(object).expect("JSON");
    if let Some(metadata) = value["metadata"].as_object_mut() {
        metadata.remove("managedFields");
    }
    value
}

#[test]
fn an_event_goes_on_without_its_managed_fields_and_otherwise_as_it_came() {
    for type_ in ["ADDED", "MODIFIED", "DELETED"] {
        let object = claim_with_managed_fields("a", 3);
        let line = format!(r#"{{"type":"{type_}","object":{object}}}"#);
        let screen = screen_event(&line, claims(), true);
        let Line::Replace(replaced) = &screen.line else {
            panic!("{:?}", screen.line)
        };
        assert!(replaced.ends_with('\n'));
        let event: serde_json::Value = serde_json::from_str(replaced).expect("JSON");
        assert_eq!(event["type"], type_);
        assert_eq!(event["object"], value_without_managed_fields(&object));
        assert!(matches!(screen.seen, Some(Seen::Decodable(ref n)) if n.name == "a"));
    }
}

#[test]
fn an_object_too_deep_only_in_its_managed_fields_passes_without_them() {
    let object = claim_with_managed_fields("deep", 300);
    assert!(depth::exceeds(object.as_bytes(), MAX_OBJECT_DEPTH));
    let screen = screen_event(
        &format!(r#"{{"type":"ADDED","object":{object}}}"#),
        claims(),
        false,
    );
    let Line::Replace(line) = &screen.line else {
        panic!("{:?}", screen.line)
    };
    match serde_json::from_str::<WatchEvent<Claim>>(line).expect("decodes") {
        WatchEvent::Added(claim) => {
            assert_eq!(claim.metadata.name.as_deref(), Some("deep"));
            assert!(claim.metadata.managed_fields.is_none());
            assert_eq!(claim.spec.resources.map(|r| r.len()), Some(1));
        }
        other => panic!("{other:?}"),
    }
    assert!(screen.seen.is_none());
}

#[test]
fn list_items_go_on_without_their_managed_fields() {
    let items = [claim_with_managed_fields("a", 2), claim("b", 10)];
    let body = list_of(&items);
    let screen = screen_list(&body, claims(), false).expect("a list");
    assert!(screen.seen.is_empty());
    let rewritten: serde_json::Value =
        serde_json::from_str(screen.body.as_deref().expect("rewritten")).expect("JSON");
    let mut expected: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    expected["items"] = json!([
        value_without_managed_fields(&items[0]),
        value_without_managed_fields(&items[1])
    ]);
    assert_eq!(rewritten, expected);
}

#[test]
fn objects_without_managed_fields_are_left_as_they_are() {
    assert_eq!(without_managed_fields(&claim("a", 10)), None);
    for not_an_object in ["[]", "1", r#"{"metadata":[]}"#, "{partial"] {
        assert_eq!(
            without_managed_fields(not_an_object),
            None,
            "{not_an_object}"
        );
    }
    let stripped = without_managed_fields(&claim_with_managed_fields("a", 1)).expect("stripped");
    assert!(!stripped.contains("managedFields"), "{stripped}");
}

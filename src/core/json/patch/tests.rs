use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn ops_json(ops: &[PatchOp]) -> Value {
    serde_json::to_value(ops).expect("ops serialize")
}

fn filter(path_match: &str, allowed: Option<&[&str]>) -> UpdateFilter {
    UpdateFilter {
        path_match: path_match.to_owned(),
        allowed_ops: allowed.map(|ops| ops.iter().map(|s| (*s).to_owned()).collect()),
    }
}

fn add(path: &str) -> PatchOp {
    PatchOp::Add {
        path: path.to_owned(),
        value: json!(1),
    }
}
fn remove(path: &str) -> PatchOp {
    PatchOp::Remove {
        path: path.to_owned(),
    }
}
fn replace(path: &str) -> PatchOp {
    PatchOp::Replace {
        path: path.to_owned(),
        value: json!(1),
    }
}

#[test]
fn dict_diff_walks_a_keys_in_order_then_adds_b_keys_in_order() {
    let a = json!({"z": 1, "gone": 2, "a": {"x": 1}, "gone2": 3});
    let b = json!({"new2": 5, "a": {"x": 2}, "z": 1, "new1": 6});
    assert_eq!(
        ops_json(&diff(&a, &b)),
        json!([
            {"op": "remove", "path": "/gone"},
            {"op": "replace", "path": "/a/x", "value": 2},
            {"op": "remove", "path": "/gone2"},
            {"op": "add", "path": "/new2", "value": 5},
            {"op": "add", "path": "/new1", "value": 6},
        ])
    );
}

#[test]
fn list_diff_recurses_then_removes_from_the_end_then_adds_ascending() {
    let a = json!({"l": [1, {"k": "v"}, 3, 4]});
    let b = json!({"l": [1, {"k": "w"}]});
    assert_eq!(
        ops_json(&diff(&a, &b)),
        json!([
            {"op": "replace", "path": "/l/1/k", "value": "w"},
            {"op": "remove", "path": "/l/3"},
            {"op": "remove", "path": "/l/2"},
        ])
    );
    assert_eq!(
        ops_json(&diff(&json!([0]), &json!([1, 2, 3]))),
        json!([
            {"op": "replace", "path": "/0", "value": 1},
            {"op": "add", "path": "/1", "value": 2},
            {"op": "add", "path": "/2", "value": 3},
        ])
    );
}

#[test]
fn type_changes_are_replaced_whole() {
    assert_eq!(
        ops_json(&diff(&json!({"a": {"b": 1}}), &json!({"a": "s"}))),
        json!([{"op": "replace", "path": "/a", "value": "s"}])
    );
    assert_eq!(
        ops_json(&diff(&json!({"a": [1]}), &json!({"a": {"0": 1}}))),
        json!([{"op": "replace", "path": "/a", "value": {"0": 1}}])
    );
    // The root itself: an empty path.
    assert_eq!(
        ops_json(&diff(&json!(1), &json!("x"))),
        json!([{"op": "replace", "path": "", "value": "x"}])
    );
}

#[test]
fn path_segments_are_escaped_rfc6901() {
    let ops = diff(&json!({}), &json!({"a/b~c": {}}));
    assert_eq!(ops[0].path(), "/a~1b~0c");
    // `~1` in a key must become `~01`, not be read back as `/`.
    let ops = diff(&json!({}), &json!({"~1": 0}));
    assert_eq!(ops[0].path(), "/~01");
}

#[test]
fn numbers_compare_by_value_but_booleans_never_equal_numbers() {
    assert!(diff(&json!({"n": 1}), &json!({"n": 1.0})).is_empty());
    assert!(diff(&json!([2.0]), &json!([2])).is_empty());
    assert_eq!(diff(&json!({"n": 1}), &json!({"n": 1.5})).len(), 1);
    // Python says True == 1; we do not (a fix).
    assert_eq!(
        ops_json(&diff(&json!({"n": 1}), &json!({"n": true}))),
        json!([{"op": "replace", "path": "/n", "value": true}])
    );
    assert_eq!(diff(&json!(0), &json!(false)).len(), 1);
    // Exact comparison: 2^53 + 1 is not the float 2^53.
    assert!(!values_equal(
        &json!(9_007_199_254_740_993_i64),
        &json!(9_007_199_254_740_992.0)
    ));
    assert!(values_equal(&json!(u64::MAX), &json!(u64::MAX)));
    assert!(!values_equal(&json!(u64::MAX), &json!(-1)));
}

#[test]
fn values_equal_ignores_key_order_and_recurses_numerically() {
    assert!(values_equal(
        &json!({"a": 1, "b": [1.0]}),
        &json!({"b": [1], "a": 1.0})
    ));
    assert!(!values_equal(&json!({"a": 1}), &json!({"a": 1, "b": null})));
    assert!(!values_equal(&json!([1]), &json!([1, 1])));
}

#[test]
fn ops_serialize_as_rfc6902_and_convert_to_json_patch() {
    let ops = vec![add("/a"), remove("/b"), replace("/c~1d")];
    assert_eq!(
        ops_json(&ops),
        json!([
            {"op": "add", "path": "/a", "value": 1},
            {"op": "remove", "path": "/b"},
            {"op": "replace", "path": "/c~1d", "value": 1},
        ])
    );
    let back: Vec<PatchOp> = serde_json::from_value(ops_json(&ops)).expect("round trip");
    assert_eq!(back, ops);
    let patch = to_json_patch(&ops).expect("valid pointers");
    assert_eq!(
        serde_json::to_value(&patch).expect("patch serializes"),
        ops_json(&ops)
    );
}

#[test]
fn to_json_patch_rejects_a_malformed_pointer() {
    let err = to_json_patch(&[remove("no-leading-slash")]).expect_err("invalid pointer");
    assert!(err.to_string().contains("no-leading-slash"), "{err}");
}

#[test]
fn first_matching_filter_decides() {
    let filters = UpdateFilters::compile(
        &[
            filter("/spec/.*", Some(&["replace"])),
            filter("/spec/x", None),
        ],
        &OperatorDomain::default(),
    )
    .expect("compiles");
    // The broad replace-only filter shadows the later permissive one.
    assert!(filters.allows(&replace("/spec/x")));
    assert!(!filters.allows(&add("/spec/x")));
    assert!(!filters.allows(&remove("/spec/x")));
}

#[test]
fn default_allowed_ops_are_all_three_and_empty_allows_none() {
    let filters = UpdateFilters::compile(
        &[filter("/a", None), filter("/b", Some(&[]))],
        &OperatorDomain::default(),
    )
    .expect("compiles");
    assert!(filters.allows(&add("/a")));
    assert!(filters.allows(&remove("/a")));
    assert!(filters.allows(&replace("/a")));
    assert!(!filters.allows(&add("/b")));
    assert!(!filters.allows(&replace("/b")));
}

#[test]
fn unmatched_ops_are_dropped() {
    let filters = UpdateFilters::compile(&[filter("/spec/a", None)], &OperatorDomain::default())
        .expect("compiles");
    let kept = filters.filter(vec![
        replace("/spec/a"),
        replace("/spec/b"),
        add("/metadata/labels/x"),
    ]);
    assert_eq!(kept, vec![replace("/spec/a")]);
    // No filters at all: nothing but Poolboy's annotations changes.
    let none = UpdateFilters::compile(&[], &OperatorDomain::default()).expect("compiles");
    assert!(none.filter(vec![replace("/spec/a")]).is_empty());
}

#[test]
fn patterns_match_the_whole_path() {
    let filters = UpdateFilters::compile(&[filter("/spec/a", None)], &OperatorDomain::default())
        .expect("compiles");
    assert!(!filters.allows(&replace("/spec/ab")));
    assert!(!filters.allows(&replace("/x/spec/a")));
    // A top-level alternation is anchored as a whole (Poolboy's `pattern + '$'` would accept
    // `/spec/a/anything` through the unanchored first branch).
    let alternation = UpdateFilters::compile(
        &[filter("/spec/a|/spec/b", None)],
        &OperatorDomain::default(),
    )
    .expect("compiles");
    assert!(alternation.allows(&replace("/spec/a")));
    assert!(alternation.allows(&replace("/spec/b")));
    assert!(!alternation.allows(&replace("/spec/a/anything")));
}

#[test]
fn python_syntax_is_accepted() {
    // Lookahead and backreferences need fancy-regex.
    let filters = UpdateFilters::compile(
        &[
            filter(r"/spec/(?!secret)\w+", None),
            filter(r"/(\w)/\1", None),
        ],
        &OperatorDomain::default(),
    )
    .expect("compiles");
    assert!(filters.allows(&replace("/spec/size")));
    assert!(!filters.allows(&replace("/spec/secret")));
    assert!(filters.allows(&replace("/q/q")));
    assert!(!filters.allows(&replace("/q/r")));
}

#[test]
fn implicit_filter_keeps_poolboy_annotations_in_sync() {
    let domain = OperatorDomain::new("poolboy.dev.local");
    let filters = UpdateFilters::compile(&[filter("/spec/.*", Some(&["replace"]))], &domain)
        .expect("compiles");
    for op in [
        add("/metadata/annotations/poolboy.dev.local~1resource-claim-name"),
        remove("/metadata/annotations/poolboy.dev.local~1resource-claim-name"),
        replace("/metadata/annotations/poolboy.dev.local~1resource-index"),
    ] {
        assert!(filters.allows(&op), "{op:?}");
    }
    // The domain is regex-escaped: its dots are literal.
    assert!(!filters.allows(&add("/metadata/annotations/poolboyXdev.local~1resource-x")));
    assert!(!filters.allows(&add("/metadata/annotations/poolboy.dev.local~1other")));
    assert!(!filters.allows(&add("/metadata/annotations/example.com~1resource-x")));
}

#[test]
fn an_earlier_filter_can_shadow_the_implicit_one() {
    let domain = OperatorDomain::default();
    let filters = UpdateFilters::compile(&[filter("/metadata/.*", Some(&["replace"]))], &domain)
        .expect("compiles");
    assert!(!filters.allows(&add(
        "/metadata/annotations/poolboy.gpte.redhat.com~1resource-x"
    )));
}

#[test]
fn compile_errors_name_the_filter() {
    let domain = OperatorDomain::default();
    let err = UpdateFilters::compile(&[filter("/ok", None), filter("/spec/(", None)], &domain)
        .expect_err("bad regex");
    assert!(
        matches!(err, PatchError::InvalidFilterRegex { index: 1, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("updateFilters[1]") && err.to_string().contains("/spec/("),
        "{err}"
    );

    let err = UpdateFilters::compile(&[filter("/spec", Some(&["add", "move"]))], &domain)
        .expect_err("bad op");
    assert!(
        matches!(&err, PatchError::UnknownFilterOp { index: 0, op, .. } if op == "move"),
        "{err:?}"
    );
    assert!(err.to_string().contains("\"/spec\""), "{err}");
}

#[test]
fn a_regex_that_blows_the_backtrack_limit_rejects() {
    // Catastrophic backtracking forced through the backtracking engine by a backreference.
    let filters = UpdateFilters::compile(
        &[filter(r"/((a+)+\2)+b", None), filter(".*", None)],
        &OperatorDomain::default(),
    )
    .expect("compiles");
    let path = format!("/{}", "a".repeat(40));
    assert!(!filters.allows(&replace(&path)));
}

// ---- properties ----

/// JSON without floats: the numeric-equality rule cannot bite, so applying the diff must give
/// exactly `b`. Keys come from a tiny alphabet (including `/` and `~`) so `a` and `b` overlap.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..3).prop_map(Value::from),
        "[ab~/]{0,2}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(("[ab~/]{0,2}", inner), 0..5)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// JSON with integral and fractional floats mixed with integers and booleans.
fn json_value_with_floats() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        (-2i64..2).prop_map(Value::from),
        (-4i64..4).prop_map(|n| Value::from(n as f64 / 2.0)),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[ab]", inner), 0..4)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

fn apply(a: &Value, ops: &[PatchOp]) -> Value {
    let mut doc = a.clone();
    let patch = to_json_patch(ops).expect("diff paths are valid pointers");
    json_patch::patch(&mut doc, &patch).expect("diff applies to its source");
    doc
}

proptest! {
    #[test]
    fn applying_the_diff_gives_b(a in json_value(), b in json_value()) {
        let ops = diff(&a, &b);
        prop_assert_eq!(apply(&a, &ops), b);
    }

    #[test]
    fn applying_the_diff_gives_b_up_to_numeric_equality(
        a in json_value_with_floats(),
        b in json_value_with_floats(),
    ) {
        let patched = apply(&a, &diff(&a, &b));
        prop_assert!(values_equal(&patched, &b), "{} vs {}", patched, b);
    }

    #[test]
    fn a_value_has_no_diff_with_itself(a in json_value_with_floats()) {
        prop_assert!(diff(&a, &a).is_empty());
    }

    #[test]
    fn only_add_remove_replace_appear(a in json_value(), b in json_value()) {
        let ops = diff(&a, &b);
        for op in ops_json(&ops).as_array().into_iter().flatten() {
            let name = op["op"].as_str().unwrap_or_default();
            prop_assert!(["add", "remove", "replace"].contains(&name), "{}", op);
        }
    }
}

const PATTERNS: &[&str] = &[
    "/a.*",
    "/a",
    "/b/.*",
    "/a|/b",
    ".*",
    "/[ab]/[ab]",
    "/metadata/.*",
];

fn op_strategy() -> impl Strategy<Value = PatchOp> {
    let path = prop_oneof![
        prop::collection::vec("[ab]{1,2}", 1..4)
            .prop_map(|segments| format!("/{}", segments.join("/"))),
        Just("/metadata/annotations/poolboy.gpte.redhat.com~1resource-x".to_owned()),
        Just("/metadata/labels/x".to_owned()),
    ];
    (path, 0..3u8).prop_map(|(path, kind)| match kind {
        0 => add(&path),
        1 => remove(&path),
        _ => replace(&path),
    })
}

fn filter_strategy() -> impl Strategy<Value = UpdateFilter> {
    let allowed = prop_oneof![
        Just(None),
        prop::sample::subsequence(vec!["add", "remove", "replace"], 0..=3)
            .prop_map(|ops| Some(ops.into_iter().map(str::to_owned).collect())),
    ];
    (prop::sample::select(PATTERNS), allowed).prop_map(|(pattern, allowed_ops)| UpdateFilter {
        path_match: pattern.to_owned(),
        allowed_ops,
    })
}

/// The reference decision, from a different regex engine: the first fully matching rule's
/// allowedOps, the implicit annotation rule last, and "dropped" when nothing matches.
fn oracle(filters: &[UpdateFilter], op: &PatchOp) -> bool {
    let implicit = UpdateFilter {
        path_match: format!(
            "/metadata/annotations/{}~1resource-.*",
            regex::escape("poolboy.gpte.redhat.com")
        ),
        allowed_ops: None,
    };
    for f in filters.iter().chain([&implicit]) {
        let re =
            regex::Regex::new(&format!("^(?:{})$", f.path_match)).expect("test patterns compile");
        if re.is_match(op.path()) {
            return match &f.allowed_ops {
                None => true,
                Some(ops) => ops.iter().any(|o| o == op.kind().as_str()),
            };
        }
    }
    false
}

proptest! {
    #[test]
    fn filter_keeps_exactly_what_the_first_matching_rule_allows(
        filters in prop::collection::vec(filter_strategy(), 0..4),
        ops in prop::collection::vec(op_strategy(), 0..8),
    ) {
        let compiled = UpdateFilters::compile(&filters, &OperatorDomain::default()).expect("compiles");
        let expected: Vec<PatchOp> = ops.iter().filter(|op| oracle(&filters, op)).cloned().collect();
        prop_assert_eq!(compiled.filter(ops), expected);
    }
}

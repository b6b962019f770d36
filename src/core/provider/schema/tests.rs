use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn compile(schema: Value) -> OpenApiSchema {
    match OpenApiSchema::compile(&schema) {
        Ok(compiled) => compiled,
        Err(e) => panic!("schema should compile: {e}"),
    }
}

fn violation(schema: Value, instance: Value) -> SchemaViolation {
    match compile(schema).validate(&instance) {
        Err(v) => v,
        Ok(()) => panic!("{instance} should be rejected"),
    }
}

fn accepts(schema: Value, instance: Value) -> bool {
    compile(schema).is_valid(&instance)
}

fn compile_error(schema: Value) -> String {
    match OpenApiSchema::compile(&schema) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("{schema} should not compile"),
    }
}

/// Every case in `python_oracle.json` gives Python's exact `str(e)` and `e.message`.
#[test]
fn matches_python_oracle_text() {
    let oracle: Value = match serde_json::from_str(include_str!("python_oracle.json")) {
        Ok(v) => v,
        Err(e) => panic!("oracle file: {e}"),
    };
    let Some(cases) = oracle["cases"].as_object() else {
        panic!("oracle file has no cases")
    };
    assert!(cases.len() >= 25);
    for (name, case) in cases {
        let schema = compile(case["schema"].clone());
        let result = schema.validate(&case["instance"]);
        match (&case["expected"], result) {
            (Value::Null, Ok(())) => {}
            (expected, Err(v)) => {
                assert_eq!(v.message(), expected["message"], "message of case {name}");
                assert_eq!(v.to_string(), expected["str"], "text of case {name}");
            }
            (expected, Ok(())) => panic!("case {name}: expected {expected}, got valid"),
        }
    }
}

#[test]
fn type_mismatch_names_path_and_rule() {
    let v = violation(
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"count": {"type": "integer"}}}}}),
        json!({"spec": {"count": "abc"}}),
    );
    assert_eq!(v.message(), "'abc' is not of type 'integer'");
    assert_eq!(v.keyword(), Some("type"));
    assert_eq!(v.instance_pointer(), "/spec/count");
    assert!(
        v.to_string()
            .contains("in schema['properties']['spec']['properties']['count']")
    );
    assert!(v.to_string().contains("On instance['spec']['count']:"));
}

#[test]
fn oas_type_checker_is_strict() {
    assert!(!accepts(json!({"type": "integer"}), json!(1.0)));
    assert!(accepts(json!({"type": "integer"}), json!(-7)));
    assert!(accepts(json!({"type": "number"}), json!(1)));
    assert!(!accepts(json!({"type": "number"}), json!(true)));
    assert!(!accepts(json!({"type": "boolean"}), json!(0)));
    assert!(!accepts(json!({"type": "string"}), json!(1)));
    assert!(!accepts(json!({"type": "array"}), json!({})));
    assert!(!accepts(json!({"type": "object"}), json!([])));
}

#[test]
fn null_is_rejected_unless_nullable() {
    let v = violation(json!({"type": "string"}), json!(null));
    assert_eq!(v.message(), "None for not nullable");
    assert!(accepts(
        json!({"type": "string", "nullable": true}),
        json!(null)
    ));
    // Untyped schemas accept null, as in openapi-schema-validator.
    assert!(accepts(json!({"minLength": 2}), json!(null)));
    // `nullable: false` and a non-boolean `nullable` do not allow null.
    assert!(!accepts(
        json!({"type": "string", "nullable": false}),
        json!(null)
    ));
    assert!(!accepts(
        json!({"type": "string", "nullable": "true"}),
        json!(null)
    ));
    // Nullable still checks non-null values.
    assert!(!accepts(
        json!({"type": "string", "nullable": true}),
        json!(3)
    ));
}

#[test]
fn nullable_accepts_null_with_enum_and_combinators() {
    // Decision: Kubernetes' reading; Poolboy (OAS 3.0.3 wording) rejects these nulls.
    let with_enum = json!({"type": "string", "nullable": true, "enum": ["a", "b"]});
    assert!(accepts(with_enum.clone(), json!(null)));
    assert!(!accepts(with_enum, json!("c")));
    let with_any_of = json!({"nullable": true, "anyOf": [{"type": "integer"}, {"type": "string"}]});
    assert!(accepts(with_any_of.clone(), json!(null)));
    assert!(!accepts(with_any_of, json!(true)));
    let with_all_of = json!({"nullable": true, "allOf": [{"type": "string"}, {"minLength": 2}]});
    assert!(accepts(with_all_of.clone(), json!(null)));
    assert!(!accepts(with_all_of, json!("a")));
    // Without nullable at that level, a typed branch still rejects null.
    assert!(!accepts(
        json!({"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        json!(null)
    ));
    // A nested nullable property.
    let nested = json!({"type": "object", "properties": {
        "a": {"type": "string", "nullable": true}, "b": {"type": "string"}}});
    assert!(accepts(nested.clone(), json!({"a": null})));
    let v = violation(nested, json!({"a": null, "b": null}));
    assert_eq!(v.instance_pointer(), "/b");
    assert_eq!(v.message(), "None for not nullable");
}

#[test]
fn int_or_string_marker_is_enforced() {
    let marker = json!({"x-kubernetes-int-or-string": true});
    assert!(accepts(marker.clone(), json!(80)));
    assert!(accepts(marker.clone(), json!("http")));
    assert!(!accepts(marker.clone(), json!(1.5)));
    let v = violation(marker, json!(true));
    assert_eq!(v.message(), "True is not of type 'integer', 'string'");
    assert_eq!(v.keyword(), Some("x-kubernetes-int-or-string"));
    // As controller-gen writes it: anyOf comes first in key order and reports.
    let generated = json!({"anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": true});
    let v = violation(generated.clone(), json!(true));
    assert_eq!(v.keyword(), Some("anyOf"));
    assert!(accepts(generated, json!("50%")));
    assert!(accepts(
        json!({"x-kubernetes-int-or-string": true, "nullable": true}),
        json!(null)
    ));
}

#[test]
fn preserve_unknown_fields_has_no_effect() {
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"a": {"type": "string"}}});
    assert!(accepts(
        schema.clone(),
        json!({"a": "x", "zzz": {"deep": null}})
    ));
    assert!(!accepts(schema, json!({"a": 1})));
    // Unknown fields are accepted when additionalProperties is absent, as in Poolboy.
    assert!(accepts(
        json!({"type": "object", "properties": {"a": {}}}),
        json!({"b": 1})
    ));
}

#[test]
fn enum_uses_python_equality() {
    let v = violation(
        json!({"type": "string", "enum": ["small", "large"]}),
        json!("medium"),
    );
    assert_eq!(v.message(), "'medium' is not one of ['small', 'large']");
    assert!(accepts(json!({"enum": [1, "a"]}), json!(1.0)));
    assert!(!accepts(json!({"enum": [1]}), json!(true)));
    assert!(!accepts(json!({"enum": [0]}), json!(false)));
    assert!(accepts(
        json!({"enum": [{"a": 1, "b": [2]}]}),
        json!({"b": [2.0], "a": 1})
    ));
    assert!(accepts(json!({"enum": ["a", null]}), json!(null)));
}

#[test]
fn pattern_searches_anywhere_unless_anchored() {
    let v = violation(
        json!({"type": "string", "pattern": "^[a-z]+$"}),
        json!("ABC"),
    );
    assert_eq!(v.message(), "'ABC' does not match '^[a-z]+$'");
    // Python's re.search: an unanchored pattern matches anywhere.
    assert!(accepts(json!({"pattern": "[0-9]"}), json!("abc1def")));
    // Lookarounds work as in Python's re.
    assert!(accepts(json!({"pattern": "^(?!admin$)"}), json!("user")));
    assert!(!accepts(json!({"pattern": "^(?!admin$)"}), json!("admin")));
    // Non-strings are not checked.
    assert!(accepts(json!({"pattern": "^a$"}), json!(5)));
}

#[test]
fn additional_properties_false_lists_extras_sorted() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}},
        "additionalProperties": false});
    assert!(accepts(schema.clone(), json!({"a": "x"})));
    let v = violation(schema.clone(), json!({"zed": 1, "a": "x", "b": 2}));
    assert_eq!(
        v.message(),
        "Additional properties are not allowed ('b', 'zed' were unexpected)"
    );
    let v = violation(schema, json!({"b": 2}));
    assert_eq!(
        v.message(),
        "Additional properties are not allowed ('b' was unexpected)"
    );
    // patternProperties exempts matching names, as jsonschema's find_additional_properties.
    assert!(accepts(
        json!({"patternProperties": {"^x-": {}}, "additionalProperties": false}),
        json!({"x-extra": 1})
    ));
    // A schema-valued additionalProperties checks each extra value.
    let v = violation(
        json!({"additionalProperties": {"type": "integer"}}),
        json!({"k": "v"}),
    );
    assert_eq!(v.instance_pointer(), "/k");
}

#[test]
fn formats_are_not_checked_like_poolboy() {
    // Poolboy builds OAS30Validator(schema) without a format checker.
    for (format, value) in [
        ("date-time", json!("yesterday")),
        ("date", json!("not a date")),
        ("int32", json!(99_999_999_999_i64)),
        ("int64", json!(1.5)),
        ("byte", json!("***")),
        ("uuid", json!("nope")),
    ] {
        assert!(accepts(json!({"format": format}), value), "{format}");
    }
    assert!(!accepts(
        json!({"type": "string", "format": "date-time"}),
        json!(3)
    ));
}

#[test]
fn bounds_honour_boolean_exclusive_flags() {
    let v = violation(
        json!({"type": "integer", "minimum": 1, "exclusiveMinimum": true}),
        json!(1),
    );
    assert_eq!(v.message(), "1 is less than or equal to the minimum of 1");
    assert!(accepts(
        json!({"minimum": 1, "exclusiveMinimum": false}),
        json!(1)
    ));
    let v = violation(
        json!({"type": "number", "maximum": 10, "exclusiveMaximum": true}),
        json!(10.0),
    );
    assert_eq!(
        v.message(),
        "10.0 is greater than or equal to the maximum of 10"
    );
    assert!(accepts(json!({"maximum": 10}), json!(10)));
    assert_eq!(
        violation(json!({"maximum": 10}), json!(11)).message(),
        "11 is greater than the maximum of 10"
    );
    assert_eq!(
        violation(json!({"minimum": 0.5}), json!(0)).message(),
        "0 is less than the minimum of 0.5"
    );
    // exclusiveMinimum alone does nothing in OAS 3.0.
    assert!(accepts(json!({"exclusiveMinimum": 5}), json!(1)));
}

#[test]
fn lengths_count_characters() {
    assert_eq!(
        violation(json!({"minLength": 1}), json!("")).message(),
        "'' should be non-empty"
    );
    assert_eq!(
        violation(json!({"minLength": 3}), json!("ab")).message(),
        "'ab' is too short"
    );
    assert_eq!(
        violation(json!({"maxLength": 0}), json!("a")).message(),
        "'a' is expected to be empty"
    );
    assert!(accepts(json!({"maxLength": 2}), json!("éé")));
}

#[test]
fn required_reports_the_first_missing_property() {
    let schema = json!({"type": "object", "required": ["name", "size"],
        "properties": {"name": {"type": "string"}}});
    let v = violation(schema.clone(), json!({"size": 1}));
    assert_eq!(v.message(), "'name' is a required property");
    assert_eq!(v.instance_pointer(), "");
    assert_eq!(
        violation(schema, json!({"name": "x"})).message(),
        "'size' is a required property"
    );
    // openapi-schema-validator does not require readOnly/writeOnly properties.
    assert!(accepts(
        json!({"required": ["id"], "properties": {"id": {"readOnly": true}}}),
        json!({})
    ));
}

#[test]
fn items_and_nested_paths() {
    let v = violation(
        json!({"type": "array", "items": {"type": "object", "properties": {
            "port": {"type": "integer", "maximum": 65535}}}}),
        json!([{"port": 80}, {"port": 70000}]),
    );
    assert_eq!(v.instance_pointer(), "/1/port");
    assert!(
        v.to_string()
            .contains("in schema['items']['properties']['port']:")
    );
    assert!(v.to_string().contains("On instance[1]['port']:"));
    let v = violation(
        json!({"properties": {"a/b": {"properties": {"c~d": {"type": "string"}}}}}),
        json!({"a/b": {"c~d": 1}}),
    );
    assert_eq!(v.instance_pointer(), "/a~1b/c~0d");
}

#[test]
fn first_error_follows_schema_key_order() {
    // Python walks keywords, then properties, in the order the schema lists them.
    let v = violation(
        json!({"properties": {"b": {"type": "string"}, "a": {"type": "string"}},
            "required": ["c"]}),
        json!({"a": 1, "b": 2}),
    );
    assert_eq!(v.instance_pointer(), "/b");
    let v = violation(
        json!({"required": ["c"], "properties": {"a": {"type": "string"}}}),
        json!({"a": 1}),
    );
    assert_eq!(v.keyword(), Some("required"));
}

#[test]
fn combinators() {
    assert_eq!(
        violation(
            json!({"anyOf": [{"type": "integer"}, {"type": "string"}]}),
            json!(true)
        )
        .message(),
        "True is not valid under any of the given schemas"
    );
    let v = violation(
        json!({"allOf": [{"type": "string"}, {"minLength": 5}]}),
        json!("abc"),
    );
    assert!(v.to_string().contains("in schema['allOf'][1]:"));
    assert!(accepts(
        json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}),
        json!(3)
    ));
    assert_eq!(
        violation(json!({"not": {"type": "string"}}), json!("x")).message(),
        "'x' should not be valid under {'type': 'string'}"
    );
}

#[test]
fn array_and_object_counts() {
    assert_eq!(
        violation(json!({"uniqueItems": true}), json!([1, 1.0])).message(),
        "[1, 1.0] has non-unique elements"
    );
    assert!(accepts(
        json!({"uniqueItems": true}),
        json!([1, true, "1", [1], {"a": 1}])
    ));
    assert!(!accepts(
        json!({"uniqueItems": true}),
        json!([{"a": 1, "b": 2}, {"b": 2, "a": 1}])
    ));
    assert!(accepts(json!({"uniqueItems": false}), json!([1, 1])));
    assert_eq!(
        violation(json!({"maxItems": 1}), json!([1, 2])).message(),
        "[1, 2] is too long"
    );
    assert_eq!(
        violation(json!({"minProperties": 2}), json!({"a": 1})).message(),
        "{'a': 1} does not have enough properties"
    );
    assert!(!accepts(json!({"multipleOf": 3}), json!(10)));
    assert!(accepts(json!({"multipleOf": 0.5}), json!(2.5)));
    assert!(accepts(json!({"multipleOf": 2}), json!(4.0)));
}

#[test]
fn compile_rejects_a_bad_regex_with_its_path() {
    let e = compile_error(json!({"properties": {"name": {"type": "string", "pattern": "(abc"}}}));
    assert!(
        e.starts_with("invalid OpenAPI schema at #/properties/name/pattern: invalid regular expression \"(abc\""),
        "{e}"
    );
}

#[test]
fn compile_rejects_bad_types_with_their_path() {
    let e = compile_error(json!({"properties": {"n": {"type": "strnig"}}}));
    assert!(
        e.starts_with("invalid OpenAPI schema at #/properties/n/type: unknown type 'strnig'"),
        "{e}"
    );
    let e = compile_error(json!({"type": ["string", "null"]}));
    assert!(
        e.contains("at #/type: type must be a single type name"),
        "{e}"
    );
}

#[test]
fn compile_rejects_other_malformed_schemas() {
    for (schema, needle) in [
        (
            json!("string"),
            "at #: a schema must be an object or a boolean",
        ),
        (
            json!({"minLength": -1}),
            "at #/minLength: minLength must not be negative",
        ),
        (
            json!({"maximum": "10"}),
            "at #/maximum: maximum must be a number",
        ),
        (
            json!({"multipleOf": 0}),
            "at #/multipleOf: multipleOf must be greater than 0",
        ),
        (
            json!({"required": "name"}),
            "at #/required: required must be a list",
        ),
        (
            json!({"items": [{}]}),
            "at #/items: items must be a single schema",
        ),
        (
            json!({"anyOf": []}),
            "at #/anyOf: anyOf must be a non-empty list",
        ),
        (json!({"enum": "a"}), "at #/enum: enum must be a list"),
        (
            json!({"$ref": "#/definitions/a"}),
            "at #/$ref: $ref is not supported",
        ),
        (
            json!({"additionalProperties": false, "patternProperties": {"(": {}}}),
            "at #/patternProperties: invalid regular expression",
        ),
        (
            json!({"properties": {"a": 3}}),
            "at #/properties/a: a schema must be",
        ),
    ] {
        let e = compile_error(schema);
        assert!(e.contains(needle), "{e} should contain {needle}");
    }
    let mut deep = json!({"type": "string"});
    for _ in 0..100 {
        deep = json!({"properties": {"a": deep}});
    }
    assert!(compile_error(deep).contains("nest deeper than"));
}

#[test]
fn unknown_keywords_and_annotations_are_ignored() {
    assert!(accepts(
        json!({"type": "string", "description": "d", "default": "x", "example": 1,
            "x-custom": {"type": "integer"}, "definitions": {"a": {"type": "bogus"}}}),
        json!("s")
    ));
}

#[test]
fn cache_shares_compiled_schemas() {
    let cache = SchemaCache::default();
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let first = cache.get_or_compile(&schema).ok();
    let again = cache.get_or_compile(&schema.clone()).ok();
    match (first, again) {
        (Some(a), Some(b)) => assert!(Arc::ptr_eq(&a, &b)),
        _ => panic!("schema should compile"),
    }
    assert_eq!(cache.len(), 1);
    let changed = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let Ok(compiled) = cache.get_or_compile(&changed) else {
        panic!("changed schema should compile")
    };
    assert!(!compiled.is_valid(&json!({"a": "x"})));
    assert_eq!(cache.len(), 2);
    assert!(cache.get_or_compile(&json!({"type": "nope"})).is_err());
    assert_eq!(cache.len(), 2);
}

#[test]
fn cache_evicts_the_least_recently_used() {
    let cache = SchemaCache::with_capacity(2);
    let (a, b, c) = (
        json!({"minimum": 1}),
        json!({"minimum": 2}),
        json!({"minimum": 3}),
    );
    let Ok(first_a) = cache.get_or_compile(&a) else {
        panic!()
    };
    assert!(cache.get_or_compile(&b).is_ok());
    assert!(cache.get_or_compile(&a).is_ok()); // a is now more recent than b
    assert!(cache.get_or_compile(&c).is_ok()); // evicts b
    assert_eq!(cache.len(), 2);
    let Ok(again_a) = cache.get_or_compile(&a) else {
        panic!()
    };
    assert!(Arc::ptr_eq(&first_a, &again_a));
}

#[test]
fn cache_is_shared_across_threads() {
    let cache = Arc::new(SchemaCache::default());
    let schema = json!({"type": "string"});
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let cache = Arc::clone(&cache);
            let schema = schema.clone();
            std::thread::spawn(move || cache.get_or_compile(&schema).is_ok())
        })
        .collect();
    for handle in handles {
        assert!(matches!(handle.join(), Ok(true)));
    }
    assert_eq!(cache.len(), 1);
}

#[test]
fn defaults_follow_poolboy_extraction() {
    let schema = json!({
        "type": "object",
        "properties": {
            "size": {"type": "string", "default": "small"},
            "spec": {
                "type": "object",
                "default": {"replaced": true},
                "properties": {
                    "replicas": {"type": "integer", "default": 1},
                    "empty": {"type": "object", "default": {"kept": 1},
                              "properties": {"x": {"type": "string"}}}
                }
            },
            "untyped": {"default": {"a": 1}, "properties": {"b": {"default": 2}}},
            "list": {"type": "array", "default": [], "items": {"type": "object",
                     "properties": {"n": {"default": 1}}}},
            "nothing": {"type": "string"},
            "nil": {"default": null}
        },
        "additionalProperties": {"properties": {"z": {"default": 1}}},
        "allOf": [{"properties": {"w": {"default": 1}}}]
    });
    assert_eq!(
        defaults_from_schema(&schema),
        Some(json!({
            "size": "small",
            // nested defaults replace the parent default entirely
            "spec": {"replicas": 1, "empty": {"kept": 1}},
            // not object-typed: no recursion
            "untyped": {"a": 1},
            "list": [],
            "nil": null
        }))
    );
    assert_eq!(defaults_from_schema(&json!({"type": "string"})), None);
    assert_eq!(
        defaults_from_schema(&json!({"properties": {"a": {"type": "object",
            "properties": {"b": {"type": "string"}}}}})),
        None
    );
    assert_eq!(defaults_from_schema(&json!("junk")), None);
    assert_eq!(
        defaults_from_schema(&json!({"properties": {"a": true}})),
        None
    );
}

#[test]
fn parameter_schema_default() {
    assert_eq!(
        schema_default(&json!({"type": "integer", "default": 3})),
        Some(&json!(3))
    );
    assert_eq!(
        schema_default(&json!({"type": "integer", "default": null})),
        None
    );
    assert_eq!(schema_default(&json!({"type": "integer"})), None);
}

/// Schemas built only from keywords that OAS 3.0 and JSON Schema draft 4 read alike.
fn common_schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({})),
        prop::sample::select(vec![
            "string", "number", "integer", "boolean", "array", "object"
        ])
        .prop_map(|t| json!({"type": t})),
        prop::collection::vec(small_value(), 1..3).prop_map(|e| json!({"enum": e})),
        (0u64..4).prop_map(|n| json!({"minLength": n})),
        (0u64..4).prop_map(|n| json!({"maxItems": n})),
        (-3i64..4, any::<bool>()).prop_map(|(n, x)| json!({"minimum": n, "exclusiveMinimum": x})),
        (-3i64..4, any::<bool>()).prop_map(|(n, x)| json!({"maximum": n, "exclusiveMaximum": x})),
        (1u64..4).prop_map(|n| json!({"multipleOf": n})),
        Just(json!({"uniqueItems": true})),
        Just(json!({"pattern": "^a"})),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            (inner.clone(), any::<bool>()).prop_map(|(s, closed)| {
                json!({"type": "object", "properties": {"a": s, "b": {"type": "integer"}},
                    "required": ["a"], "additionalProperties": !closed})
            }),
            inner.clone().prop_map(|s| json!({"items": s})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"anyOf": v})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"allOf": v})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"oneOf": v})),
            inner.prop_map(|s| json!({"not": s})),
        ]
    })
}

fn small_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..4).prop_map(|n| json!(n)),
        prop::sample::select(vec![0.5, -1.5, 2.0]).prop_map(|f| json!(f)),
        prop::sample::select(vec!["", "a", "ab", "ba"]).prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(prop::sample::select(vec!["a", "b", "c"]), inner, 0..3)
                .prop_map(|m| json!(m)),
        ]
    })
}

/// Integral floats (`2.0`) are where OAS 3.0 (not an integer) and draft 4 may differ.
fn has_integral_float(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.is_f64() && n.as_f64().is_some_and(|f| f.fract() == 0.0),
        Value::Array(items) => items.iter().any(has_integral_float),
        Value::Object(map) => map.values().any(has_integral_float),
        _ => false,
    }
}

proptest! {
    /// On the keywords both read alike, the verdict agrees with the `jsonschema` crate.
    #[test]
    fn verdicts_agree_with_jsonschema_draft4(schema in common_schema(), instance in small_value()) {
        prop_assume!(!has_integral_float(&instance));
        let ours = OpenApiSchema::compile(&schema);
        let theirs = jsonschema::draft4::new(&schema);
        prop_assert!(ours.is_ok() && theirs.is_ok());
        if let (Ok(ours), Ok(theirs)) = (ours, theirs) {
            let ours_valid = ours.is_valid(&instance);
            prop_assert_eq!(ours_valid, theirs.is_valid(&instance), "schema {} instance {}", schema, instance);
        }
    }

    /// Validation never panics and a violation always renders.
    #[test]
    fn violations_always_render(schema in common_schema(), instance in small_value()) {
        if let Ok(compiled) = OpenApiSchema::compile(&schema)
            && let Err(v) = compiled.validate(&instance)
        {
            prop_assert!(v.to_string().starts_with(v.message()));
        }
    }
}

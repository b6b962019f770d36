use serde_json::{Map, Value, json};

use super::*;
use crate::core::test_fixtures::{Env, map_of};

/// A provider with one parameter of each kind Poolboy knows.
const LAB: &str = r#"
metadata: {name: lab}
spec:
  parameters:
  - name: region
    required: true
    validation:
      openAPIV3Schema: {type: string, enum: [us-east, eu-west]}
  - name: size
    allowUpdate: true
    default: {value: 2}
    validation:
      openAPIV3Schema: {type: integer, minimum: 1, maximum: 8}
      checks:
      - name: even size
        check: value % 2 == 0
  - name: flavor
    validation:
      openAPIV3Schema: {type: string, default: small}
  - name: password
    default:
      template: "{{ '[a-z0-9]{12}' | strgen }}"
  - name: label
    default:
      template: "{{ region | default('any') }}-{{ size }}"
"#;

fn validate(
    env: &Env,
    provider: &str,
    requested: &str,
    validated: Option<&str>,
) -> ParameterValidation {
    let compiled = env.compile(provider);
    let requested = map_of(requested);
    let validated = validated.map(map_of);
    validate_parameters(
        &compiled,
        Some(&requested),
        validated.as_ref(),
        &env.scope(),
        &env.templates,
    )
}

#[test]
fn defaults_come_from_value_schema_default_and_template() {
    let env = Env::new();
    let result = validate(&env, LAB, "{region: eu-west}", None);
    assert!(result.is_valid(), "{:?}", result.errors);
    let values = &result.values;
    assert_eq!(values["region"], "eu-west");
    assert_eq!(values["size"], 2);
    assert_eq!(values["flavor"], "small");
    let password = values["password"].as_str().unwrap();
    assert_eq!(password.len(), 12, "{password}");
    // A default template sees the values collected so far.
    assert_eq!(values["label"], "eu-west-2");
    // Requested values first, then each default in declaration order.
    let keys: Vec<&str> = values.keys().map(String::as_str).collect();
    assert_eq!(keys, ["region", "size", "flavor", "password", "label"]);
}

#[test]
fn a_default_template_result_is_typed() {
    let env = Env::new();
    let result = validate(
        &env,
        r#"
metadata: {name: p}
spec:
  parameters:
  - name: count
    default: {template: "{{ (1 + 2) | int }}"}
  - name: enabled
    default: {template: "{{ 'yes' | bool }}"}
"#,
        "{}",
        None,
    );
    assert_eq!(result.values["count"], json!(3));
    assert_eq!(result.values["enabled"], json!(true));
}

#[test]
fn a_default_template_is_rendered_once_and_then_kept() {
    let env = Env::new();
    let first = validate(&env, LAB, "{region: eu-west}", None);
    let stored = serde_json::to_string(&first.values).unwrap();
    // The next validation finds the value in status and keeps it, even though the template
    // would render a new random string.
    let second = validate(&env, LAB, "{region: eu-west}", Some(&stored));
    assert!(second.is_valid(), "{:?}", second.errors);
    assert_eq!(second.values["password"], first.values["password"]);
    assert_eq!(second.values, first.values);
}

#[test]
fn explicit_values_win_over_stored_values_and_defaults() {
    let env = Env::new();
    let result = validate(
        &env,
        LAB,
        "{region: eu-west, size: 6, password: mine}",
        Some("{region: eu-west, size: 4, password: old}"),
    );
    assert_eq!(result.values["size"], 6);
    assert_eq!(result.values["password"], "mine");
    assert_eq!(
        result.errors,
        vec!["Parameter password is immutable.".to_owned()]
    );
}

#[test]
fn schema_default_applies_only_when_default_value_is_null() {
    let env = Env::new();
    let result = validate(
        &env,
        r#"
metadata: {name: p}
spec:
  parameters:
  - name: a
    default: {value: null}
    validation: {openAPIV3Schema: {type: string, default: from-schema}}
  - name: b
    default: {value: explicit}
    validation: {openAPIV3Schema: {type: string, default: from-schema}}
  - name: c
"#,
        "{}",
        None,
    );
    assert_eq!(result.values, map_of("{a: from-schema, b: explicit}"));
}

#[test]
fn a_required_parameter_without_value_is_reported() {
    let env = Env::new();
    let result = validate(&env, LAB, "{}", None);
    assert_eq!(result.errors, vec!["Parameter region is required."]);
    assert!(!result.is_valid());
}

#[test]
fn schema_failure_uses_the_validator_text() {
    let env = Env::new();
    let result = validate(&env, LAB, "{region: mars}", None);
    assert_eq!(result.errors.len(), 1, "{:?}", result.errors);
    let error = &result.errors[0];
    assert!(
        error.starts_with("Parameter region schema validation failed: 'mars' is not one of "),
        "{error}"
    );
    // The schema failure stops the checks of that parameter.
    let result = validate(&env, LAB, "{region: eu-west, size: 9}", None);
    assert_eq!(result.errors.len(), 1, "{:?}", result.errors);
    assert!(
        result.errors[0].starts_with(
            "Parameter size schema validation failed: 9 is greater than the maximum of 8"
        ),
        "{:?}",
        result.errors
    );
}

#[test]
fn a_failed_check_is_reported_by_name() {
    let env = Env::new();
    let result = validate(&env, LAB, "{region: eu-west, size: 3}", None);
    assert_eq!(
        result.errors,
        vec!["Parameter size failed check: even size"]
    );
}

#[test]
fn every_check_runs_and_an_exception_is_reported_with_its_message() {
    let env = Env::new();
    let result = validate(
        &env,
        r#"
metadata: {name: p}
spec:
  parameters:
  - name: count
    validation:
      checks:
      - {name: explodes, check: "value + 'x' == 1"}
      - {name: positive, check: "value > 0"}
      - {name: fails, check: "value > 10"}
      - {name: small, check: "value < 100"}
"#,
        "{count: 5}",
        None,
    );
    assert_eq!(result.errors.len(), 2, "{:?}", result.errors);
    assert!(
        result.errors[0].starts_with("Parameter count exception on check explodes: "),
        "{:?}",
        result.errors
    );
    assert_eq!(result.errors[1], "Parameter count failed check: fails");
}

#[test]
fn checks_see_value_the_other_parameter_values_and_the_scope() {
    let env = Env::new();
    let compiled = env.compile(
        r#"
metadata: {name: p}
spec:
  parameters:
  - name: low
    default: {value: 1}
  - name: high
    validation:
      checks:
      - {name: above low, check: "value > low"}
      - {name: claim namespace, check: "resource_claim.metadata.namespace == 'user1'"}
      - {name: provider var, check: "limit == 10"}
  vars: {limit: 10}
"#,
    );
    let scope = env
        .scope()
        .with_variable(
            "resource_claim",
            json!({"metadata": {"namespace": "user1"}}),
        )
        .with_template_variables(compiled.spec().vars.as_ref());
    let check = |requested: &str| {
        validate_parameters(
            &compiled,
            Some(&map_of(requested)),
            None,
            &scope,
            &env.templates,
        )
        .errors
    };
    assert_eq!(check("{high: 5}"), Vec::<String>::new());
    assert_eq!(
        check("{high: 0}"),
        vec!["Parameter high failed check: above low"]
    );
}

#[test]
fn a_changed_value_is_immutable_unless_allow_update() {
    let env = Env::new();
    let stored = "{region: eu-west, size: 2, flavor: small, password: p, label: l}";
    let result = validate(&env, LAB, "{region: us-east}", Some(stored));
    assert_eq!(result.errors, vec!["Parameter region is immutable."]);
    // size allows updates: validated like a new value.
    let result = validate(&env, LAB, "{region: eu-west, size: 4}", Some(stored));
    assert!(result.is_valid(), "{:?}", result.errors);
    let result = validate(&env, LAB, "{region: eu-west, size: 5}", Some(stored));
    assert_eq!(
        result.errors,
        vec!["Parameter size failed check: even size"]
    );
}

#[test]
fn an_unchanged_value_stays_valid_after_the_rules_change() {
    let env = Env::new();
    // Stored when mars was allowed and size 3 passed; both now fail the rules.
    let stored = "{region: mars, size: 3, flavor: small, password: p, label: l}";
    let result = validate(&env, LAB, "{region: mars, size: 3}", Some(stored));
    assert!(result.is_valid(), "{:?}", result.errors);
    // The same values on a first validation fail.
    let result = validate(&env, LAB, "{region: mars, size: 3}", None);
    assert_eq!(result.errors.len(), 2, "{:?}", result.errors);
}

#[test]
fn a_default_for_a_parameter_added_later_is_valid_even_if_immutable() {
    // #120: the provider gained `password` after the claim was validated.
    let env = Env::new();
    let result = validate(
        &env,
        r#"
metadata: {name: p}
spec:
  parameters:
  - name: region
  - name: tier
    default: {value: gold}
    validation:
      checks: [{name: never, check: "false"}]
"#,
        "{region: x}",
        Some("{region: x}"),
    );
    assert!(result.is_valid(), "{:?}", result.errors);
    assert_eq!(result.values["tier"], "gold");
}

#[test]
fn defaults_are_validated_on_the_first_validation() {
    let env = Env::new();
    let result = validate(
        &env,
        r#"
metadata: {name: p}
spec:
  parameters:
  - name: tier
    default: {value: gold}
    validation:
      checks: [{name: never, check: "false"}]
"#,
        "{}",
        None,
    );
    assert_eq!(result.errors, vec!["Parameter tier failed check: never"]);
}

#[test]
fn an_undeclared_parameter_is_reported_unless_unchanged_from_status() {
    let env = Env::new();
    let provider = "metadata: {name: p}\nspec: {parameters: [{name: a}]}";
    let result = validate(&env, provider, "{a: 1, colour: red}", None);
    assert_eq!(result.errors, vec!["No such parameter colour."]);
    // A parameter the provider dropped since the claim was validated.
    let result = validate(
        &env,
        provider,
        "{a: 1, colour: red}",
        Some("{a: 1, colour: red}"),
    );
    assert!(result.is_valid(), "{:?}", result.errors);
    let result = validate(
        &env,
        provider,
        "{a: 1, colour: blue}",
        Some("{a: 1, colour: red}"),
    );
    assert_eq!(result.errors, vec!["No such parameter colour."]);
}

#[test]
fn errors_follow_declaration_order_then_unknown_names() {
    let env = Env::new();
    let result = validate(&env, LAB, "{zzz: 1, size: 3, aaa: 2}", None);
    assert_eq!(
        result.errors,
        vec![
            "Parameter region is required.",
            "Parameter size failed check: even size",
            "No such parameter zzz.",
            "No such parameter aaa.",
        ]
    );
}

#[test]
fn a_failing_default_template_is_an_error_not_a_panic() {
    let env = Env::new();
    let result = validate(
        &env,
        "metadata: {name: p}\nspec: {parameters: [{name: a, default: {template: '{{ missing.value }}'}}]}",
        "{}",
        None,
    );
    assert_eq!(result.errors.len(), 1);
    assert!(
        result.errors[0].starts_with("Parameter a default template failed: "),
        "{:?}",
        result.errors
    );
}

#[test]
fn no_requested_values_is_an_empty_map() {
    let env = Env::new();
    let compiled = env.compile(LAB);
    let result = validate_parameters(&compiled, None, None, &env.scope(), &env.templates);
    assert_eq!(result.errors, vec!["Parameter region is required."]);
}

#[test]
fn with_defaults_overlays_values_on_static_defaults_only() {
    let env = Env::new();
    let compiled = env.compile(LAB);
    let given: Map<String, Value> = map_of("{region: eu-west, size: 6}");
    let all = with_defaults(&compiled, Some(&given));
    // Templated defaults are not static: only `default.value` and the schema default.
    assert_eq!(all, map_of("{size: 6, flavor: small, region: eu-west}"));
    assert_eq!(
        with_defaults(&compiled, None),
        map_of("{size: 2, flavor: small}")
    );
}

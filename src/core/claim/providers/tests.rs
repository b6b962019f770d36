use serde_json::json;

use super::*;
use crate::core::template::ClockReading;
use crate::core::template::view::{Subjects, claim_view, provider_view};
use crate::core::test_fixtures::{Env, claim, get, json_of};

const CONFIGMAP: &str = r#"
metadata: {name: configmap}
spec:
  match:
    apiVersion: v1
    kind: ConfigMap
    metadata: {labels: {example.com/kind: config}}
  default:
    data: {owner: unknown, color: grey}
    metadata: {labels: {tier: bronze}}
  validation:
    openAPIV3Schema:
      type: object
      properties:
        data:
          type: object
          properties:
            size: {type: string, default: small}
            color: {type: string, default: from-schema}
          additionalProperties: {type: string}
        metadata: {type: object}
    checks:
    - name: data is small
      check: data | length < 5
    - name: not red
      check: data.color != 'red'
    - name: explodes on purple
      check: "data.color != 'purple' or (1 + 'x')"
"#;

const SECRET: &str = "metadata: {name: secret}\nspec: {match: {apiVersion: v1, kind: Secret}}";

const BROKEN: &str = r#"
metadata: {name: broken}
spec:
  match: {apiVersion: v1, kind: Service}
  matchIgnore: ["("]
"#;

const LAB: &str = "metadata: {name: lab}\nspec: {parameters: [{name: region}]}";

/// A resources claim `c` in `user1` with the resources of the YAML list `resources`.
fn resources_claim(resources: &str) -> ResourceClaim {
    let resources = json_of(resources);
    claim(&json!({"metadata": {"name": "c"}, "spec": {"resources": resources}}).to_string())
}

#[test]
fn a_claim_has_exactly_one_shape() {
    let both = claim("metadata: {name: c}\nspec: {provider: {name: lab}, resources: [{}]}");
    assert_eq!(
        claim_shape(&both).unwrap_err().to_string(),
        "ResourceClaim has both spec.provider and spec.resources"
    );
    for spec in ["{}", "{resources: []}"] {
        let neither = claim(&format!("metadata: {{name: c}}\nspec: {spec}"));
        assert_eq!(
            claim_shape(&neither).unwrap_err(),
            AssignmentError::NeitherProviderNorResources,
            "{spec}"
        );
    }
    let provider = claim("metadata: {name: c}\nspec: {provider: {name: lab}}");
    assert_eq!(claim_shape(&provider), Ok(ClaimShape::Provider));
    let resources = resources_claim("[{template: {kind: Secret}}]");
    assert_eq!(claim_shape(&resources), Ok(ClaimShape::Resources));
}

#[test]
fn a_provider_claim_resolves_its_provider_by_name() {
    let env = Env::new();
    let catalog = env.catalog(&[LAB, BROKEN]);
    let lab = claim("metadata: {name: c}\nspec: {provider: {name: lab}}");
    assert_eq!(claim_provider(&lab, &catalog).unwrap().name(), "lab");

    let missing = claim("metadata: {name: c}\nspec: {provider: {name: nope}}");
    assert_eq!(
        claim_provider(&missing, &catalog).unwrap_err().to_string(),
        "ResourceProvider nope not found"
    );
    let broken = claim("metadata: {name: c}\nspec: {provider: {name: broken}}");
    let error = claim_provider(&broken, &catalog).unwrap_err().to_string();
    assert!(
        error.starts_with("ResourceProvider broken is invalid: spec.matchIgnore: "),
        "{error}"
    );
    let resources = resources_claim("[{template: {}}]");
    assert_eq!(
        claim_provider(&resources, &catalog).unwrap_err(),
        AssignmentError::NeitherProviderNorResources
    );
}

#[test]
fn the_provider_of_a_provider_claim_is_immutable_once_recorded() {
    let env = Env::new();
    let catalog = env.catalog(&[LAB, "metadata: {name: other}\nspec: {}"]);
    let changed = claim(
        "metadata: {name: c}\nspec: {provider: {name: other}}\nstatus: {provider: {name: lab}}",
    );
    assert_eq!(
        claim_provider(&changed, &catalog).unwrap_err().to_string(),
        "spec.provider value (other) does not match status.provider value (lab): \
             spec.provider is immutable"
    );
    let same = claim(
        "metadata: {name: c}\nspec: {provider: {name: lab}}\nstatus: {provider: {name: lab}}",
    );
    assert!(claim_provider(&same, &catalog).is_ok());
}

#[test]
fn each_resource_gets_its_explicit_provider_or_the_one_that_matches() {
    let env = Env::new();
    let catalog = env.catalog(&[CONFIGMAP, SECRET, LAB]);
    let claim = resources_claim(
        r#"
- template: {apiVersion: v1, kind: Secret}
- provider: {name: lab}
  # An explicit provider wins even when the template matches another provider.
  template: {apiVersion: v1, kind: Secret}
- template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {labels: {example.com/kind: config, extra: yes}}
"#,
    );
    let names: Vec<&str> = assign_providers(&claim, &catalog)
        .unwrap()
        .iter()
        .map(|p| p.name())
        .collect();
    assert_eq!(names, ["secret", "lab", "configmap"]);
}

#[test]
fn resource_provider_errors_name_the_resource() {
    let env = Env::new();
    let catalog = env.catalog(&[
        CONFIGMAP,
        SECRET,
        BROKEN,
        SECRET.replace("secret", "secret2").as_str(),
    ]);
    let cases = [
        (
            "[{provider: {name: configmap}}, {template: {kind: Pod}}]",
            "spec.resources[1]: Unable to match template to ResourceProvider".to_owned(),
        ),
        (
            "[{template: {apiVersion: v1, kind: Secret, data: {}}}]",
            "spec.resources[0]: Resource template matches multiple ResourceProviders: \
                 secret, secret2"
                .to_owned(),
        ),
        (
            "[{provider: {name: missing}}]",
            "spec.resources[0]: ResourceProvider missing not found".to_owned(),
        ),
        (
            "[{name: nothing}]",
            "ResourceClaim spec.resources[0] requires either an explicit provider or a \
                 resource template to match"
                .to_owned(),
        ),
    ];
    for (resources, message) in cases {
        let error = assign_providers(&resources_claim(resources), &catalog).unwrap_err();
        assert_eq!(error.to_string(), message, "{resources}");
    }
    // A broken provider is reported as broken, whether named or matched.
    for resources in [
        "[{provider: {name: broken}}]",
        "[{template: {apiVersion: v1, kind: Service}}]",
    ] {
        let error = assign_providers(&resources_claim(resources), &catalog)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("spec.resources[0]: ResourceProvider broken is invalid: "),
            "{error}"
        );
    }
}

fn defaults(
    env: &Env,
    provider: &str,
    resources: &str,
    index: usize,
) -> Result<Value, AssignmentError> {
    let compiled = env.compile(provider);
    let claim = resources_claim(resources);
    let scope = env
        .scope()
        .with_variable("resource_claim", claim_view(&claim, &env.domain));
    template_with_defaults(&claim, index, &compiled, &scope, &env.templates)
}

/// A default printing the current time counts only while it fills a gap.
#[test]
fn a_default_from_the_clock_makes_the_claim_depend_on_it_only_until_written() {
    const SCHEDULED: &str = r#"
metadata: {name: scheduled}
spec:
  match: {apiVersion: v1, kind: ConfigMap}
  template: {enable: true}
  default:
    data: {start: "{{ timestamp.utcnow }}"}
"#;
    let compiled = Env::new().compile(SCHEDULED);
    let reading = |resources: &str| {
        let env = Env::new();
        let claim = resources_claim(resources);
        let templates = env.templates.watching();
        template_with_defaults(&claim, 0, &compiled, &env.scope(), &templates).unwrap();
        templates.clock_reading()
    };
    assert!(reading("[{template: {kind: ConfigMap}}]").unpredictable);
    let written = "[{template: {kind: ConfigMap, data: {start: '2026-11-21T12:00:00Z'}}}]";
    assert_eq!(reading(written), ClockReading::default());
}

#[test]
fn defaults_fill_in_missing_keys_without_overwriting() {
    let env = Env::new();
    let template = defaults(
        &env,
        CONFIGMAP,
        "[{template: {kind: ConfigMap, data: {color: blue}, metadata: {labels: {a: b}}}}]",
        0,
    )
    .unwrap();
    assert_eq!(
        template,
        json_of(
            r#"
kind: ConfigMap
data: {color: blue, owner: unknown, size: small}
metadata: {labels: {a: b, tier: bronze}}
"#
        )
    );
}

#[test]
fn the_provider_default_wins_over_the_schema_default() {
    // §6.3: `default` is merged first, so a schema default only fills what is still missing.
    let env = Env::new();
    let template = defaults(&env, CONFIGMAP, "[{template: {}}]", 0).unwrap();
    assert_eq!(template["data"]["color"], "grey");
    assert_eq!(template["data"]["size"], "small");
}

#[test]
fn a_resource_without_template_gets_the_defaults_alone() {
    let env = Env::new();
    let template = defaults(&env, CONFIGMAP, "[{provider: {name: configmap}}]", 0).unwrap();
    assert_eq!(template["data"]["owner"], "unknown");
    let none = defaults(&env, SECRET, "[{provider: {name: secret}}]", 0).unwrap();
    assert_eq!(none, json!({}));
}

const TEMPLATED_DEFAULT: &str = r#"
metadata: {name: templated}
spec:
  template: {enable: true}
  vars: {team: blue}
  default:
    metadata:
      name: "{{ resource_name }}-{{ resource_index }}"
      namespace: "{{ resource_claim.metadata.namespace }}"
    data:
      provider: "{{ resource_provider.metadata.name }}"
      team: "{{ team }}"
      count: "{{ (resource_index + 1) | int }}"
"#;

#[test]
fn a_default_is_rendered_when_templates_are_enabled() {
    let env = Env::new();
    let template = defaults(
        &env,
        TEMPLATED_DEFAULT,
        "[{template: {}}, {name: db, template: {data: {team: red}}}]",
        1,
    )
    .unwrap();
    assert_eq!(
        template,
        json_of(
            r#"
data: {team: red, provider: templated, count: 2}
metadata: {name: db-1, namespace: user1}
"#
        )
    );
}

#[test]
fn a_default_stays_literal_when_templates_are_disabled() {
    let env = Env::new();
    let provider = TEMPLATED_DEFAULT.replace("template: {enable: true}", "template: {}");
    let template = defaults(&env, &provider, "[{template: {}}]", 0).unwrap();
    assert_eq!(template["data"]["team"], "{{ team }}");
}

#[test]
fn a_failing_default_template_names_resource_and_provider() {
    let env = Env::new();
    let provider = r#"
metadata: {name: templated}
spec:
  template: {enable: true}
  default: {data: {x: "{{ nothing.here }}"}}
"#;
    let error = defaults(&env, provider, "[{template: {}}]", 0)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(
            "spec.resources[0]: default template of ResourceProvider templated failed: "
        ),
        "{error}"
    );
}

fn validate(env: &Env, provider: &str, template: Value) -> Result<(), String> {
    let compiled = env.compile(provider);
    let claim = resources_claim("[{template: {}}]");
    let subjects = Subjects::new(Some(&claim), None, &env.domain);
    let scope = env
        .scope()
        .with_variable("resource_claim", &subjects.claim)
        .with_variable("resource_handle", &subjects.handle)
        .with_variable(
            "resource_provider",
            provider_view(compiled.resource(), &env.domain),
        )
        .with_template_variables(compiled.spec().vars.as_ref());
    validate_template(&compiled, &template, &scope, &env.templates)
}

#[test]
fn a_valid_template_passes() {
    let env = Env::new();
    assert_eq!(
        validate(&env, CONFIGMAP, json!({"data": {"color": "blue"}})),
        Ok(())
    );
}

#[test]
fn the_schema_is_checked_first_with_the_validator_text() {
    let env = Env::new();
    // Fails the schema and the "not red" check: the schema message wins.
    let error = validate(&env, CONFIGMAP, json!({"data": {"color": 1}})).unwrap_err();
    assert!(error.starts_with("1 is not of type 'string'"), "{error}");
}

#[test]
fn checks_run_in_order_and_the_first_failure_is_the_message() {
    let env = Env::new();
    let too_big = json!({"data": {"a": "1", "b": "2", "c": "3", "d": "4", "color": "red"}});
    assert_eq!(
        validate(&env, CONFIGMAP, too_big),
        Err("Validation check failed: data is small".to_owned())
    );
    assert_eq!(
        validate(&env, CONFIGMAP, json!({"data": {"color": "red"}})),
        Err("Validation check failed: not red".to_owned())
    );
    let error = validate(&env, CONFIGMAP, json!({"data": {"color": "purple"}})).unwrap_err();
    assert!(
        error.starts_with("Validation check \"explodes on purple\" failed with exception: "),
        "{error}"
    );
}

#[test]
fn checks_see_the_template_keys_over_the_scope() {
    let env = Env::new();
    let provider = r#"
metadata: {name: p}
spec:
  vars: {allowed: blue}
  validation:
    checks:
    - name: top-level keys
      check: "spec.color == allowed and kind == 'Thing'"
    - name: claim
      check: "resource_claim.metadata.name == 'c' and resource_provider.metadata.name == 'p'"
    - name: a template key shadows resource_claim
      check: "resource_claim == 'mine'"
"#;
    let ok = json!({"kind": "Thing", "spec": {"color": "blue"}});
    assert_eq!(
        validate(&env, provider, ok),
        Err("Validation check failed: a template key shadows resource_claim".to_owned())
    );
    let wrong = json!({"kind": "Thing", "spec": {"color": "red"}});
    assert_eq!(
        validate(&env, provider, wrong),
        Err("Validation check failed: top-level keys".to_owned())
    );
    // Poolboy spreads the template after `resource_claim`, so a template key of that name
    // hides the claim from every check.
    let shadowing = json!({"kind": "Thing", "spec": {"color": "blue"}, "resource_claim": "mine"});
    assert_eq!(
        validate(&env, provider, shadowing),
        Err("Validation check failed: claim".to_owned())
    );
}

#[test]
fn a_provider_without_validation_accepts_anything() {
    let env = Env::new();
    assert_eq!(validate(&env, SECRET, json!("not even an object")), Ok(()));
    let catalog = env.catalog(&[SECRET]);
    assert_eq!(get(&catalog, "secret").name(), "secret");
}

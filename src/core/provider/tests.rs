use serde_json::json;

use super::*;
use crate::core::test_fixtures::{Env, get, provider};

const CONFIGMAP: &str = r#"
metadata: {name: configmap}
spec:
  match:
    apiVersion: v1
    kind: ConfigMap
  matchIgnore: ["/data(/.*)?"]
  override: {apiVersion: v1, kind: ConfigMap}
  updateFilters:
  - pathMatch: /data/.*
  validation:
    openAPIV3Schema:
      type: object
      properties:
        data: {type: object}
  parameters:
  - name: size
    validation:
      openAPIV3Schema: {type: integer, maximum: 8}
"#;

fn paths(problems: &[ProviderProblem]) -> Vec<&str> {
    problems.iter().map(|p| p.path.as_str()).collect()
}

#[test]
fn a_sound_provider_compiles_with_its_schemas_filters_and_reference() {
    let env = Env::new();
    let compiled = env.compile(CONFIGMAP);
    assert_eq!(compiled.name(), "configmap");
    assert_eq!(compiled.resource_name(), "configmap");
    assert_eq!(
        json!(compiled.reference(&env.domain)),
        json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1",
            "kind": "ResourceProvider",
            "name": "configmap",
            "namespace": "poolboy",
        })
    );
    let schema = compiled.template_schema().expect("template schema");
    assert!(schema.is_valid(&json!({"data": {}})));
    assert!(!schema.is_valid(&json!({"data": "x"})));
    let size = compiled.parameter_schema("size").expect("parameter schema");
    assert!(size.is_valid(&json!(8)));
    assert!(!size.is_valid(&json!(9)));
    assert!(compiled.parameter_schema("other").is_none());
}

#[test]
fn resource_name_comes_from_spec_resource_name() {
    let env = Env::new();
    let compiled = env.compile("metadata: {name: p}\nspec: {resourceName: lab}");
    assert_eq!(compiled.resource_name(), "lab");
}

#[test]
fn every_problem_is_reported_at_once_with_its_path() {
    let env = Env::new();
    let problems = env.problems(
        r#"
metadata: {name: broken}
spec:
  matchIgnore: ["/spec/(unclosed"]
  updateFilters:
  - pathMatch: "/data/[z-a]"
  validation:
    openAPIV3Schema: {type: strnig}
    checks:
    - name: unbalanced
      check: "spec.size >"
  parameters:
  - name: size
    validation:
      openAPIV3Schema: {type: integer, pattern: "("}
      checks:
      - name: bad
        check: "value is"
  - name: size
  - name: password
    default:
      template: "{{ '[a-z]{8}' | strgen"
  template:
    enable: true
    definition:
      spec:
        items: ["ok", "{{ broken }"]
  override:
    metadata:
      name: "{% if guid %}x"
  default:
    data: "{{ }}"
  linkedResourceProviders:
  - name: other
    when: "size >"
    waitFor: "(("
    parameterValues:
      owner: "{{ owner"
  lifespan:
    default: "{{ 1h"
  healthCheck: "status ==="
  readinessCheck: "status.ready and"
  statusSummaryTemplate:
    state: "{{ resources[0 }}"
  vars:
    greeting: "{% endif %}"
"#,
    );
    let mut found = paths(&problems);
    found.sort_unstable();
    assert_eq!(
        found,
        vec![
            "spec.default.data",
            "spec.healthCheck",
            "spec.lifespan.default",
            "spec.linkedResourceProviders[0].parameterValues.owner",
            "spec.linkedResourceProviders[0].waitFor",
            "spec.linkedResourceProviders[0].when",
            "spec.matchIgnore",
            "spec.override.metadata.name",
            "spec.parameters[0].validation.checks[0].check",
            "spec.parameters[0].validation.openAPIV3Schema",
            "spec.parameters[1].name",
            "spec.parameters[2].default.template",
            "spec.readinessCheck",
            "spec.statusSummaryTemplate.state",
            "spec.template.definition.spec.items[1]",
            "spec.updateFilters",
            "spec.validation.checks[0].check",
            "spec.validation.openAPIV3Schema",
            "spec.vars.greeting",
        ]
    );
    let message = |path: &str| {
        problems
            .iter()
            .find(|p| p.path == path)
            .map(|p| p.message.clone())
            .unwrap_or_default()
    };
    assert!(message("spec.matchIgnore").contains("/spec/(unclosed"));
    assert!(message("spec.updateFilters").contains("/data/[z-a]"));
    assert!(message("spec.validation.openAPIV3Schema").contains("strnig"));
    assert_eq!(
        message("spec.parameters[1].name"),
        "duplicate parameter size"
    );
    assert!(
        message("spec.template.definition.spec.items[1]").contains("{{ broken }"),
        "{problems:?}"
    );
    // Displayed as `path: message`, joined with `; ` in the error a claim sees.
    let error = ProviderError::Invalid {
        name: "broken".into(),
        problems: problems[..2].to_vec(),
    };
    assert_eq!(
        error.to_string(),
        format!(
            "ResourceProvider broken is invalid: {}: {}; {}: {}",
            problems[0].path, problems[0].message, problems[1].path, problems[1].message
        )
    );
}

#[test]
fn a_duplicate_parameter_is_a_problem_with_or_without_a_schema() {
    let env = Env::new();
    let problems =
        env.problems("metadata: {name: p}\nspec: {parameters: [{name: a}, {name: b}, {name: a}]}");
    assert_eq!(
        problems,
        vec![ProviderProblem {
            path: "spec.parameters[2].name".into(),
            message: "duplicate parameter a".into(),
        }]
    );
}

#[test]
fn default_and_override_are_plain_data_unless_templates_are_enabled() {
    let env = Env::new();
    env.compile(
        r#"
metadata: {name: plain}
spec:
  default: {data: {text: "{{ not a template"}}
  override: {apiVersion: v1, kind: ConfigMap, data: {x: "{% nope"}}
"#,
    );
    let problems = env.problems(
        r#"
metadata: {name: templated}
spec:
  template: {enable: true}
  default: {data: {text: "{{ not a template"}}
  override: {apiVersion: v1, kind: ConfigMap, data: {x: "{% nope"}}
"#,
    );
    assert_eq!(
        paths(&problems),
        vec!["spec.default.data.text", "spec.override.data.x"]
    );
}

#[test]
fn conditions_are_checked_as_wrapped_in_bool() {
    // `a) or (b` parses on its own inside `{{ (…) | bool }}` only by accident; a stray
    // `}}` does not.
    let env = Env::new();
    let problems = env.problems(
        r#"
metadata: {name: p}
spec:
  validation:
    checks:
    - {name: ok, check: "spec is defined"}
    - {name: closes, check: "x }} {{ y"}
"#,
    );
    assert_eq!(paths(&problems), vec!["spec.validation.checks[1].check"]);
}

const MISSING_LINK: &str = r#"
metadata: {name: aggregate}
spec:
  linkedResourceProviders:
  - name: present
  - name: absent
"#;

#[test]
fn the_catalog_reports_missing_linked_providers() {
    let env = Env::new();
    let catalog = env.catalog(&[MISSING_LINK, "metadata: {name: present}\nspec: {}"]);
    let error = catalog.get("aggregate").unwrap_err();
    assert_eq!(
        error.to_string(),
        "ResourceProvider aggregate is invalid: spec.linkedResourceProviders[1].name: \
             ResourceProvider absent not found"
    );
    let problems: Vec<_> = catalog
        .problems()
        .map(|(name, p)| (name, p.len()))
        .collect();
    assert_eq!(problems, vec![("aggregate", 1)]);
}

#[test]
fn a_relist_drops_the_providers_it_no_longer_shows() {
    let env = Env::new();
    let mut catalog = env.catalog(&[
        "metadata: {name: kept}\nspec: {}",
        "metadata: {name: gone}\nspec: {}",
    ]);
    let gone = catalog.retain(|name| name == "kept");
    assert_eq!(gone, ["gone"]);
    assert!(catalog.get("kept").is_ok());
    assert!(matches!(
        catalog.get("gone"),
        Err(ProviderError::NotFound(_))
    ));
}

#[test]
fn a_link_becomes_valid_when_its_provider_arrives_and_invalid_when_it_goes() {
    // Provider events arrive in any order: the catalog must not keep a provider invalid
    // because its linked provider came second.
    let env = Env::new();
    let compiler = env.compiler();
    let mut catalog = ProviderCatalog::default();
    catalog.insert(provider(MISSING_LINK), &compiler);
    catalog.insert(provider("metadata: {name: present}\nspec: {}"), &compiler);
    catalog.check_links();
    assert!(catalog.get("aggregate").is_err());
    catalog.insert(provider("metadata: {name: absent}\nspec: {}"), &compiler);
    catalog.check_links();
    assert!(catalog.get("aggregate").is_ok(), "still invalid");
    assert_eq!(catalog.problems().count(), 0);
    catalog.remove("absent");
    catalog.check_links();
    assert!(matches!(
        catalog.get("aggregate"),
        Err(ProviderError::Invalid { .. })
    ));
}

#[test]
fn get_tells_not_found_from_invalid() {
    let env = Env::new();
    let catalog = env.catalog(&[
        CONFIGMAP,
        "metadata: {name: broken}\nspec: {matchIgnore: ['(']}",
    ]);
    assert_eq!(get(&catalog, "configmap").name(), "configmap");
    assert_eq!(
        catalog.get("nope").unwrap_err(),
        ProviderError::NotFound("nope".into())
    );
    assert_eq!(
        catalog.get("nope").unwrap_err().to_string(),
        "ResourceProvider nope not found"
    );
    let invalid = catalog.get("broken").unwrap_err().to_string();
    assert!(
        invalid.starts_with("ResourceProvider broken is invalid: spec.matchIgnore: "),
        "{invalid}"
    );
}

const SECRET: &str = r#"
metadata: {name: secret}
spec:
  match: {apiVersion: v1, kind: Secret}
"#;

const LABELLED_SECRET: &str = r#"
metadata: {name: labelled-secret}
spec:
  match:
    apiVersion: v1
    kind: Secret
    metadata: {labels: {tier: gold}}
"#;

#[test]
fn match_finds_the_one_provider_whose_match_fits() {
    let env = Env::new();
    let catalog = env.catalog(&[CONFIGMAP, SECRET, "metadata: {name: no-match}\nspec: {}"]);
    let found = catalog
        .find_by_match(&json!({"apiVersion": "v1", "kind": "Secret", "data": {}}))
        .unwrap();
    assert_eq!(found.name(), "secret");
}

#[test]
fn no_match_and_ambiguous_match_are_errors() {
    let env = Env::new();
    let catalog = env.catalog(&[CONFIGMAP, SECRET, LABELLED_SECRET]);
    let error = catalog
        .find_by_match(&json!({"apiVersion": "v1", "kind": "Service"}))
        .unwrap_err();
    assert_eq!(error, ProviderError::NoMatch);
    assert_eq!(
        error.to_string(),
        "Unable to match template to ResourceProvider"
    );
    let gold = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"labels": {"tier": "gold"}},
    });
    let error = catalog.find_by_match(&gold).unwrap_err();
    assert_eq!(
        error.to_string(),
        "Resource template matches multiple ResourceProviders: labelled-secret, secret"
    );
}

#[test]
fn an_empty_match_matches_nothing() {
    let env = Env::new();
    let catalog = env.catalog(&["metadata: {name: empty}\nspec: {match: {}}"]);
    assert_eq!(
        catalog
            .find_by_match(&json!({"kind": "Secret"}))
            .unwrap_err(),
        ProviderError::NoMatch
    );
}

#[test]
fn a_broken_provider_that_matches_is_reported_as_invalid_not_as_no_match() {
    let env = Env::new();
    let catalog = env.catalog(&[r#"
metadata: {name: secret}
spec:
  match: {apiVersion: v1, kind: Secret}
  updateFilters: [{pathMatch: "("}]
"#]);
    let error = catalog
        .find_by_match(&json!({"apiVersion": "v1", "kind": "Secret"}))
        .unwrap_err();
    assert!(
        matches!(&error, ProviderError::Invalid { name, problems }
                if name == "secret" && problems[0].path == "spec.updateFilters"),
        "{error:?}"
    );
}

#[test]
fn insert_replaces_and_remove_forgets() {
    let env = Env::new();
    let compiler = env.compiler();
    let mut catalog = ProviderCatalog::default();
    catalog.insert(provider(SECRET), &compiler);
    catalog.insert(
        provider("metadata: {name: secret}\nspec: {match: {kind: Other}}"),
        &compiler,
    );
    assert!(catalog.find_by_match(&json!({"kind": "Other"})).is_ok());
    assert!(
        catalog
            .find_by_match(&json!({"apiVersion": "v1", "kind": "Secret"}))
            .is_err()
    );
    catalog.remove("secret");
    assert_eq!(
        catalog.get("secret").unwrap_err(),
        ProviderError::NotFound("secret".into())
    );
}

use serde_json::json;

use super::*;
use crate::core::test_fixtures::{Env, claim, get, handle, map_of, now};

fn generate(
    env: &Env,
    providers: &[&str],
    top: &str,
    values: Option<&str>,
    subjects: &Subjects,
) -> Result<Vec<DesiredResource>, DesiredResourcesError> {
    let catalog = env.catalog(providers);
    let generation = Generation {
        catalog: &catalog,
        templates: &env.templates,
        domain: &env.domain,
        subjects,
        now: now(),
    };
    let values = values.map(map_of);
    generation.resources(get(&catalog, top), values.as_ref())
}

fn names(resources: &[DesiredResource]) -> Vec<(&str, &str)> {
    resources
        .iter()
        .map(|r| (r.name.as_str(), r.provider.name.as_str()))
        .collect()
}

const NAMESPACE: &str = r#"
metadata: {name: namespace}
spec:
  parameters: [{name: owner}]
  template:
    enable: true
    definition: {metadata: {labels: {owner: "{{ owner }}"}}}
  override: {apiVersion: v1, kind: Namespace}
"#;

const CONFIG: &str = r#"
metadata: {name: config}
spec:
  resourceName: settings
  parameters:
  - name: owner
  - name: message
    default: {value: hello}
  linkedResourceProviders:
  - name: namespace
    parameterValues: {owner: "{{ owner }}"}
  template:
    enable: true
    definition: {data: {message: "{{ message }}", owner: "{{ owner }}"}}
  override: {apiVersion: v1, kind: ConfigMap}
"#;

const ENVIRONMENT: &str = r#"
metadata: {name: environment}
spec:
  parameters:
  - name: owner
  - name: with_config
    default: {value: true}
  linkedResourceProviders:
  - name: config
    when: "with_config | bool"
    parameterValues:
      owner: "{{ owner }}"
      message: "Welcome, {{ owner }}"
  - name: namespace
    resourceName: bare-namespace
    when: "not (with_config | bool)"
    parameterValues: {owner: "{{ owner }}"}
"#;

#[test]
fn linked_resources_come_first_depth_first_and_the_own_resource_last() {
    let env = Env::new();
    let resources = generate(
        &env,
        &[NAMESPACE, CONFIG],
        "config",
        Some("{owner: alice}"),
        &Subjects::default(),
    )
    .unwrap();
    assert_eq!(
        names(&resources),
        [("namespace", "namespace"), ("settings", "config")]
    );
    assert_eq!(
        resources[0].template,
        json!({"metadata": {"labels": {"owner": "alice"}}})
    );
    // The own resource sees the provider's defaults.
    assert_eq!(
        resources[1].template,
        json!({"data": {"message": "hello", "owner": "alice"}})
    );
    assert_eq!(
        json!(resources[1].provider),
        json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1",
            "kind": "ResourceProvider",
            "name": "config",
            "namespace": "poolboy",
        })
    );
}

#[test]
fn nested_links_expand_and_an_aggregator_adds_no_resource_of_its_own() {
    let env = Env::new();
    let resources = generate(
        &env,
        &[NAMESPACE, CONFIG, ENVIRONMENT],
        "environment",
        Some("{owner: bob}"),
        &Subjects::default(),
    )
    .unwrap();
    // The link's resource name is the linked provider's name, not its resourceName.
    assert_eq!(
        names(&resources),
        [("namespace", "namespace"), ("config", "config")]
    );
    assert_eq!(resources[1].template["data"]["message"], "Welcome, bob");
}

#[test]
fn a_false_when_skips_the_link() {
    let env = Env::new();
    let resources = generate(
        &env,
        &[NAMESPACE, CONFIG, ENVIRONMENT],
        "environment",
        Some("{owner: bob, with_config: false}"),
        &Subjects::default(),
    )
    .unwrap();
    assert_eq!(names(&resources), [("bare-namespace", "namespace")]);
}

#[test]
fn parameter_values_of_links_are_typed_templates() {
    let env = Env::new();
    let sized = r#"
metadata: {name: sized}
spec:
  parameters: [{name: size}, {name: tags}]
  template:
    enable: true
    definition: {size: "{{ size | int }}", double: "{{ (size * 2) | int }}", tags: "{{ tags | object }}"}
  override: {apiVersion: v1, kind: Thing}
"#;
    let parent = r#"
metadata: {name: parent}
spec:
  parameters: [{name: base}]
  linkedResourceProviders:
  - name: sized
    parameterValues:
      size: "{{ (base + 1) | int }}"
      tags: "{{ ['a', base | string] | object }}"
"#;
    let resources = generate(
        &env,
        &[sized, parent],
        "parent",
        Some("{base: 2}"),
        &Subjects::default(),
    )
    .unwrap();
    assert_eq!(
        resources[0].template,
        json!({"size": 3, "double": 6, "tags": ["a", "2"]})
    );
}

#[test]
fn the_same_provider_may_appear_twice_under_two_resource_names() {
    let env = Env::new();
    let pair = r#"
metadata: {name: pair}
spec:
  linkedResourceProviders:
  - {name: namespace, resourceName: left, parameterValues: {owner: l}}
  - {name: namespace, resourceName: right, parameterValues: {owner: r}}
"#;
    let resources = generate(&env, &[NAMESPACE, pair], "pair", None, &Subjects::default()).unwrap();
    assert_eq!(
        names(&resources),
        [("left", "namespace"), ("right", "namespace")]
    );
    assert_eq!(resources[1].template["metadata"]["labels"]["owner"], "r");
}

#[test]
fn an_override_without_definition_gives_an_empty_template() {
    let env = Env::new();
    let resources = generate(
        &env,
        &["metadata: {name: p}\nspec: {override: {apiVersion: v1, kind: Secret}}"],
        "p",
        None,
        &Subjects::default(),
    )
    .unwrap();
    assert_eq!(names(&resources), [("p", "p")]);
    assert_eq!(resources[0].template, json!({}));
}

#[test]
fn a_cycle_is_an_error_not_a_hang() {
    let env = Env::new();
    let a = "metadata: {name: a}\nspec: {linkedResourceProviders: [{name: b}, {name: b}], override: {kind: A}}";
    let b = "metadata: {name: b}\nspec: {linkedResourceProviders: [{name: a}, {name: a}]}";
    let error = generate(&env, &[a, b], "a", None, &Subjects::default()).unwrap_err();
    assert!(
        matches!(error, DesiredResourcesError::TooDeep(_)),
        "{error}"
    );
    assert!(error.to_string().contains("a cycle?"), "{error}");
    let own = "metadata: {name: own}\nspec: {linkedResourceProviders: [{name: own}]}";
    let error = generate(&env, &[own], "own", None, &Subjects::default()).unwrap_err();
    assert!(
        matches!(error, DesiredResourcesError::TooDeep(_)),
        "{error}"
    );
}

#[test]
fn template_errors_name_the_provider_and_the_place() {
    let env = Env::new();
    let bad_when =
        "metadata: {name: p}\nspec: {linkedResourceProviders: [{name: q, when: 'x.y + 1'}]}";
    let q = "metadata: {name: q}\nspec: {override: {kind: Q}}";
    let error = generate(&env, &[bad_when, q], "p", None, &Subjects::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("ResourceProvider p: linkedResourceProviders[0].when failed: "),
        "{error}"
    );
    let bad_value = "metadata: {name: p}\nspec: {linkedResourceProviders: [{name: q, parameterValues: {v: '{{ missing }}'}}]}";
    let error = generate(&env, &[bad_value, q], "p", None, &Subjects::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(
            "ResourceProvider p: linkedResourceProviders[0].parameterValues.v failed: "
        ),
        "{error}"
    );
    let bad_definition =
        "metadata: {name: p}\nspec: {template: {definition: {v: '{{ missing }}'}}}";
    let error = generate(&env, &[bad_definition], "p", None, &Subjects::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("ResourceProvider p: template.definition failed: "),
        "{error}"
    );
}

#[test]
fn the_definition_sees_claim_handle_provider_and_vars_with_handle_vars_winning() {
    let env = Env::new();
    let provider = r#"
metadata: {name: p}
spec:
  vars: {color: red, size: small}
  parameters: [{name: region}]
  template:
    definition:
      claim: "{{ resource_claim.metadata.namespace }}"
      handle: "{{ resource_handle.metadata.name }}"
      provider: "{{ resource_provider.metadata.name }}"
      color: "{{ color }}"
      size: "{{ size }}"
      region: "{{ region }}"
"#;
    let claim = claim("metadata: {name: c, namespace: user7}\nspec: {provider: {name: p}}");
    let handle = handle("metadata: {name: guid-abcde}\nspec: {vars: {color: blue}}");
    let subjects = Subjects::new(Some(&claim), Some(&handle), &env.domain);
    let resources = generate(&env, &[provider], "p", Some("{region: eu}"), &subjects).unwrap();
    assert_eq!(
        resources[0].template,
        json!({
            "claim": "user7",
            "handle": "guid-abcde",
            "provider": "p",
            "color": "blue",
            "size": "small",
            "region": "eu",
        })
    );
}

#[test]
fn vars_override_parameter_values_of_the_same_name() {
    // Δ§3.4 (Q9): template variables are inserted last, so a var hides a parameter.
    let env = Env::new();
    let provider = r#"
metadata: {name: p}
spec:
  vars: {region: from-vars, label: "{{ region }}-{{ size }}"}
  parameters: [{name: region}, {name: size}]
  template:
    definition: {region: "{{ region }}", label: "{{ label }}"}
"#;
    let resources = generate(
        &env,
        &[provider],
        "p",
        Some("{region: from-parameter, size: 3}"),
        &Subjects::default(),
    )
    .unwrap();
    assert_eq!(
        resources[0].template,
        json!({"region": "from-vars", "label": "from-vars-3"})
    );
}

#[test]
fn a_missing_linked_provider_is_reported() {
    // The catalog marks the parent invalid; generating from it directly reports the link.
    let env = Env::new();
    let catalog =
        env.catalog(&["metadata: {name: p}\nspec: {linkedResourceProviders: [{name: gone}]}"]);
    assert!(catalog.get("p").is_err());
    let compiled =
        env.compile("metadata: {name: p}\nspec: {linkedResourceProviders: [{name: gone}]}");
    let subjects = Subjects::default();
    let generation = Generation {
        catalog: &catalog,
        templates: &env.templates,
        domain: &env.domain,
        subjects: &subjects,
        now: now(),
    };
    let error = generation.resources(&compiled, None).unwrap_err();
    assert_eq!(error.to_string(), "ResourceProvider gone not found");
}

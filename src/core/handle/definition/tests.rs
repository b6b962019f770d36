use serde_json::json;

use super::*;
use crate::core::test_fixtures::{Env, claim, get, handle, json_of, now};

const LAB: &str = r#"
metadata: {name: lab}
spec:
  vars: {catalog: lab-catalog, shadowed: from-provider}
  template: {enable: true}
  override:
    apiVersion: anarchy.gpte.redhat.com/v1
    kind: AnarchySubject
    metadata:
      name: "lab-{{ guid }}"
      namespace: anarchy
    spec:
      governor: "{{ catalog }}"
      index: "{{ resource_index | int }}"
      name: "{{ resource_name }}"
      shadowed: "{{ shadowed }}"
      region: "{{ region | default('parameters are not visible') }}"
      requester: "{{ requester_user.metadata.name | default('nobody') }}"
      template_size: "{{ resource_template.spec.size | default(0) | int }}"
      claim: "{{ resource_claim.metadata.name | default('none') }}"
      state: "{{ resource_state.status.phase | default('no state') }}"
"#;

const PLAIN: &str = r#"
metadata: {name: plain}
spec:
  override:
    apiVersion: v1
    kind: ConfigMap
    metadata: {namespace: managed}
    data: {greeting: "{{ not rendered }}"}
"#;

const BARE: &str = "metadata: {name: bare}\nspec: {}";

const HANDLE: &str = r#"
metadata: {name: guid-abcde, namespace: poolboy, uid: handle-uid}
spec:
  vars: {shadowed: from-handle}
  resources:
  - name: lab
    provider: {apiVersion: poolboy.gpte.redhat.com/v1, kind: ResourceProvider, name: lab, namespace: poolboy}
    template:
      spec: {size: 4, extra: kept}
      metadata: {labels: {from: template}}
  - provider: {apiVersion: poolboy.gpte.redhat.com/v1, kind: ResourceProvider, name: plain, namespace: poolboy}
    template:
      data: {greeting: hi, other: x}
"#;

struct Fixture {
    env: Env,
    catalog: ProviderCatalog,
}

use crate::core::provider::ProviderCatalog;

impl Fixture {
    fn new(providers: &[&str]) -> Self {
        let env = Env::new();
        let catalog = env.catalog(providers);
        Self { env, catalog }
    }

    fn providers(&self, handle: &ResourceHandle) -> Vec<&CompiledProvider> {
        handle
            .spec
            .resources
            .iter()
            .flatten()
            .map(|r| get(&self.catalog, &r.provider.name))
            .collect()
    }

    fn definition(
        &self,
        handle: &ResourceHandle,
        index: usize,
        states: &[Option<Value>],
        requester: Option<&Requester>,
    ) -> Result<Value, DefinitionError> {
        let providers = self.providers(handle);
        let mut states = states.to_vec();
        states.resize(providers.len(), None);
        let subjects = Subjects::new(None, Some(handle), &self.env.domain);
        let resources = HandleResources {
            handle,
            providers: &providers,
            states: &states,
        };
        let context = DefinitionContext {
            domain: &self.env.domain,
            templates: &self.env.templates,
            subjects: &subjects,
            requester,
            now: now(),
        };
        resources.definition(index, &Map::new(), &context)
    }
}

fn annotations(definition: &Value) -> Map<String, Value> {
    definition["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn an_override_is_rendered_and_merged_over_the_handle_template() {
    let fixture = Fixture::new(&[LAB, PLAIN]);
    let definition = fixture.definition(&handle(HANDLE), 0, &[], None).unwrap();
    assert_eq!(definition["apiVersion"], "anarchy.gpte.redhat.com/v1");
    assert_eq!(definition["kind"], "AnarchySubject");
    assert_eq!(definition["metadata"]["name"], "lab-abcde");
    assert_eq!(definition["metadata"]["namespace"], "anarchy");
    assert_eq!(
        definition["metadata"]["labels"],
        json!({"from": "template"})
    );
    // Handle template keys the override does not touch stay.
    assert_eq!(definition["spec"]["size"], 4);
    assert_eq!(definition["spec"]["extra"], "kept");
    assert_eq!(
        definition["spec"],
        json!({
            "size": 4,
            "extra": "kept",
            "governor": "lab-catalog",
            "index": 0,
            "name": "lab",
            "shadowed": "from-handle",
            "region": "parameters are not visible",
            "requester": "nobody",
            "template_size": 4,
            "claim": "none",
            "state": "no state",
        })
    );
}

#[test]
fn an_override_is_merged_as_is_when_templates_are_disabled() {
    let fixture = Fixture::new(&[LAB, PLAIN]);
    let definition = fixture.definition(&handle(HANDLE), 1, &[], None).unwrap();
    // The override overwrites; handle-only keys remain.
    assert_eq!(
        definition["data"],
        json!({"greeting": "{{ not rendered }}", "other": "x"})
    );
    assert_eq!(definition["metadata"]["namespace"], "managed");
}

#[test]
fn the_override_sees_the_live_state_and_the_requester() {
    let fixture = Fixture::new(&[LAB, PLAIN]);
    let requester = Requester {
        user: Some(json!({"metadata": {"name": "alice"}})),
        identities: vec![],
    };
    let definition = fixture
        .definition(
            &handle(HANDLE),
            0,
            &[Some(json!({"status": {"phase": "Active"}}))],
            Some(&requester),
        )
        .unwrap();
    assert_eq!(definition["spec"]["state"], "Active");
    assert_eq!(definition["spec"]["requester"], "alice");
}

#[test]
fn linked_template_vars_reach_the_override() {
    let fixture = Fixture::new(&[
        "metadata: {name: p}\nspec: {template: {enable: true}, override: {apiVersion: v1, kind: ConfigMap, metadata: {namespace: '{{ lab_namespace }}'}}}",
    ]);
    let handle = handle(
        "metadata: {name: guid-abcde}\nspec: {resources: [{provider: {apiVersion: x, kind: ResourceProvider, name: p, namespace: poolboy}}]}",
    );
    let providers = fixture.providers(&handle);
    let subjects = Subjects::new(None, Some(&handle), &fixture.env.domain);
    let resources = HandleResources {
        handle: &handle,
        providers: &providers,
        states: &[None],
    };
    let context = DefinitionContext {
        domain: &fixture.env.domain,
        templates: &fixture.env.templates,
        subjects: &subjects,
        requester: None,
        now: now(),
    };
    let vars = Map::from_iter([("lab_namespace".to_owned(), json!("lab-abcde"))]);
    let definition = resources.definition(0, &vars, &context).unwrap();
    assert_eq!(definition["metadata"]["namespace"], "lab-abcde");
}

fn one_resource_handle(template: &str) -> ResourceHandle {
    let template = json_of(template);
    handle(
            &json!({
                "metadata": {"name": "guid-abcde", "uid": "u"},
                "spec": {"resources": [
                    {"provider": {"apiVersion": "x", "kind": "ResourceProvider", "name": "bare", "namespace": "poolboy"}},
                    {"provider": {"apiVersion": "x", "kind": "ResourceProvider", "name": "bare", "namespace": "poolboy"},
                     "template": template},
                ]},
            })
            .to_string(),
        )
}

#[test]
fn a_name_is_generated_from_the_index_and_the_handle_guid() {
    let fixture = Fixture::new(&[BARE]);
    let handle = one_resource_handle("{apiVersion: v1, kind: ConfigMap}");
    let definition = fixture.definition(&handle, 1, &[], None).unwrap();
    assert_eq!(definition["metadata"]["generateName"], "guid1-");
    assert_eq!(definition["metadata"]["name"], "guid1-abcde");
}

#[test]
fn a_template_generate_name_is_kept_and_a_template_name_wins() {
    let fixture = Fixture::new(&[BARE]);
    let handle = one_resource_handle(
        "{apiVersion: v1, kind: ConfigMap, metadata: {generateName: my-config-}}",
    );
    let definition = fixture.definition(&handle, 1, &[], None).unwrap();
    assert_eq!(definition["metadata"]["generateName"], "my-config-");
    assert_eq!(definition["metadata"]["name"], "my-config-abcde");

    let handle = one_resource_handle("{apiVersion: v1, kind: ConfigMap, metadata: {name: fixed}}");
    let definition = fixture.definition(&handle, 1, &[], None).unwrap();
    assert_eq!(definition["metadata"]["name"], "fixed");
    assert!(definition["metadata"].get("generateName").is_none());
}

#[test]
fn a_reference_pins_name_and_namespace() {
    let fixture = Fixture::new(&[BARE]);
    let mut handle = one_resource_handle(
        "{apiVersion: v1, kind: ConfigMap, metadata: {name: renamed, namespace: elsewhere}}",
    );
    handle.status = Some(serde_json::from_value(json!({"resources": [
            {},
            {"reference": {"apiVersion": "v1", "kind": "ConfigMap", "name": "original", "namespace": "home"}},
        ]})).unwrap());
    let definition = fixture.definition(&handle, 1, &[], None).unwrap();
    assert_eq!(definition["metadata"]["name"], "original");
    assert_eq!(definition["metadata"]["namespace"], "home");
}

#[test]
fn a_legacy_spec_reference_pins_too() {
    let fixture = Fixture::new(&[BARE]);
    let mut handle = one_resource_handle("{apiVersion: v1, kind: Namespace}");
    let resources = handle.spec.resources.as_mut().unwrap();
    resources[1].reference = Some(
        serde_json::from_value(json!(
            {"apiVersion": "v1", "kind": "Namespace", "name": "legacy"}
        ))
        .unwrap(),
    );
    let definition = fixture.definition(&handle, 1, &[], None).unwrap();
    assert_eq!(definition["metadata"]["name"], "legacy");
    assert!(definition["metadata"].get("namespace").is_none());
    assert_eq!(
        status_references(&handle)[1].as_ref().unwrap().name,
        "legacy"
    );
    assert_eq!(status_references(&handle)[0], None);
}

#[test]
fn api_version_and_kind_cannot_change_once_referenced() {
    let fixture = Fixture::new(&[BARE]);
    for (template, field, from, to) in [
        (
            "{apiVersion: v2, kind: ConfigMap}",
            "apiVersion",
            "v1",
            "v2",
        ),
        (
            "{apiVersion: v1, kind: Secret}",
            "kind",
            "ConfigMap",
            "Secret",
        ),
    ] {
        let mut handle = one_resource_handle(template);
        handle.status = Some(
            serde_json::from_value(json!({"resources": [
                {},
                {"reference": {"apiVersion": "v1", "kind": "ConfigMap", "name": "original"}},
            ]}))
            .unwrap(),
        );
        let error = fixture.definition(&handle, 1, &[], None).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("Unable to change {field} for resource original from {from} to {to}")
        );
    }
}

#[test]
fn a_definition_needs_api_version_and_kind() {
    let fixture = Fixture::new(&[BARE]);
    for (template, missing) in [
        ("{kind: ConfigMap}", "an apiVersion"),
        ("{apiVersion: v1}", "a kind"),
        ("{apiVersion: v1, kind: 7}", "a kind"),
    ] {
        let handle = one_resource_handle(template);
        let error = fixture.definition(&handle, 1, &[], None).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "Template processing by ResourceProvider bare for ResourceHandle guid-abcde \
                     produced definition without {missing}"
            ),
            "{template}"
        );
    }
    // A resource entry with no template at all has neither.
    let handle = one_resource_handle("{}");
    assert!(matches!(
        fixture.definition(&handle, 0, &[], None),
        Err(DefinitionError::Missing {
            field: "an apiVersion",
            ..
        })
    ));
    assert!(matches!(
        fixture.definition(&handle, 5, &[], None),
        Err(DefinitionError::NoSuchResource(5))
    ));
    let not_object = one_resource_handle("[1, 2]");
    assert!(matches!(
        fixture.definition(&not_object, 1, &[], None),
        Err(DefinitionError::NotAnObject)
    ));
}

#[test]
fn poolboy_annotations_are_always_set() {
    let fixture = Fixture::new(&[BARE]);
    let handle = one_resource_handle("{apiVersion: v1, kind: ConfigMap}");
    let definition = fixture.definition(&handle, 1, &[], None).unwrap();
    assert_eq!(
        json!(annotations(&definition)),
        json!({
            "poolboy.gpte.redhat.com/resource-provider-name": "bare",
            "poolboy.gpte.redhat.com/resource-provider-namespace": "poolboy",
            "poolboy.gpte.redhat.com/resource-handle-name": "guid-abcde",
            "poolboy.gpte.redhat.com/resource-handle-namespace": "poolboy",
            "poolboy.gpte.redhat.com/resource-handle-uid": "u",
            "poolboy.gpte.redhat.com/resource-index": "1",
        })
    );
    // No labels and no ownerReferences are added.
    assert!(definition["metadata"].get("labels").is_none());
    assert!(definition["metadata"].get("ownerReferences").is_none());
}

#[test]
fn claim_pool_and_requester_annotations_are_added_when_known() {
    let fixture = Fixture::new(&[BARE]);
    let mut handle = one_resource_handle("{apiVersion: v1, kind: ConfigMap}");
    handle.spec.resource_claim = Some(serde_json::from_value(json!(
            {"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim", "name": "c", "namespace": "user1"}
        )).unwrap());
    handle.spec.resource_pool = Some(serde_json::from_value(json!(
            {"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourcePool", "name": "gold", "namespace": "poolboy"}
        )).unwrap());
    let requester = Requester {
        user: Some(json!({"metadata": {"name": "alice"}})),
        identities: vec![
            json!({"metadata": {"name": "sso:alice"}, "extra": {"email": "alice@example.com", "name": "Alice"}}),
            json!({"extra": {"email": "second@example.com"}}),
        ],
    };
    let definition = fixture
        .definition(&handle, 1, &[], Some(&requester))
        .unwrap();
    let annotations = annotations(&definition);
    let key = |k: &str| annotations[&format!("poolboy.gpte.redhat.com/{k}")].clone();
    assert_eq!(key("resource-claim-name"), "c");
    assert_eq!(key("resource-claim-namespace"), "user1");
    assert_eq!(key("resource-pool-name"), "gold");
    assert_eq!(key("resource-pool-namespace"), "poolboy");
    assert_eq!(key("resource-requester-user"), "alice");
    assert_eq!(key("resource-requester-email"), "alice@example.com");
    assert_eq!(key("resource-requester-name"), "Alice");
    // A missing identity field is the empty string.
    assert_eq!(key("resource-requester-preferred-username"), "");

    // Without identities there are no identity annotations; without a user, no user one.
    let no_identity = Requester {
        user: None,
        identities: vec![],
    };
    let definition = fixture
        .definition(&handle, 1, &[], Some(&no_identity))
        .unwrap();
    let keys: Vec<String> = annotations_of(&definition);
    assert!(!keys.iter().any(|k| k.contains("requester")), "{keys:?}");
}

fn annotations_of(definition: &Value) -> Vec<String> {
    annotations(definition).keys().cloned().collect()
}

#[test]
fn resource_annotations_and_labels_have_their_precedence() {
    let fixture = Fixture::new(&[BARE]);
    let mut handle = one_resource_handle(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  annotations:
    from-template: t
    shared: template
    poolboy.gpte.redhat.com/resource-index: "99"
  labels: {from-template: t, shared: template}
"#,
    );
    handle.spec.resource_annotations = Some(
        [
            ("shared", "handle"),
            ("from-handle", "h"),
            ("poolboy.gpte.redhat.com/resource-handle-name", "spoofed"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    );
    handle.spec.resource_labels = Some(
        [("shared", "handle"), ("from-handle", "h")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    );
    let definition = fixture.definition(&handle, 1, &[], None).unwrap();
    let annotations = annotations(&definition);
    assert_eq!(annotations["from-template"], "t");
    // resourceAnnotations win over the template's …
    assert_eq!(annotations["shared"], "handle");
    assert_eq!(annotations["from-handle"], "h");
    // … and Poolboy's keys win over both.
    assert_eq!(
        annotations["poolboy.gpte.redhat.com/resource-handle-name"],
        "guid-abcde"
    );
    assert_eq!(annotations["poolboy.gpte.redhat.com/resource-index"], "1");
    // resourceLabels win over template labels.
    assert_eq!(
        definition["metadata"]["labels"],
        json!({"from-template": "t", "shared": "handle", "from-handle": "h"})
    );
}

#[test]
fn resource_labels_create_the_labels_map() {
    let fixture = Fixture::new(&[BARE]);
    let mut handle = one_resource_handle("{apiVersion: v1, kind: ConfigMap}");
    handle.spec.resource_labels = Some([("team".to_owned(), "a".to_owned())].into());
    let definition = fixture.definition(&handle, 1, &[], None).unwrap();
    assert_eq!(definition["metadata"]["labels"], json!({"team": "a"}));
    // An empty map adds nothing.
    handle.spec.resource_labels = Some(Default::default());
    let definition = fixture.definition(&handle, 1, &[], None).unwrap();
    assert!(definition["metadata"].get("labels").is_none());
}

// The link gate (§9, Δ B22).

const NAMESPACE: &str =
    "metadata: {name: namespace}\nspec: {override: {apiVersion: v1, kind: Namespace}}";

const CONFIG: &str = r#"
metadata: {name: config}
spec:
  vars: {wanted: Active}
  linkedResourceProviders:
  - name: namespace
    resourceName: second
    waitFor: "linked_resource_state.status.phase == wanted and ns_name == linked_resource_state.metadata.name"
    templateVars:
    - {name: ns_name, from: /metadata/name}
    - {name: missing, from: /metadata/nothing}
  override: {apiVersion: v1, kind: ConfigMap}
"#;

fn linked_handle() -> ResourceHandle {
    let entry = |name: &str, provider: &str| json!({"name": name, "provider": {"apiVersion": "x", "kind": "ResourceProvider", "name": provider, "namespace": "poolboy"}});
    handle(
        &json!({
            "metadata": {"name": "guid-abcde"},
            "spec": {"resources": [
                entry("first", "namespace"),
                entry("second", "namespace"),
                entry("config", "config"),
            ]},
        })
        .to_string(),
    )
}

fn gate(fixture: &Fixture, handle: &ResourceHandle, states: &[Option<Value>]) -> LinkGate {
    let providers = fixture.providers(handle);
    let resources = HandleResources {
        handle,
        providers: &providers,
        states,
    };
    let claim = claim("metadata: {name: c}\nspec: {}");
    let subjects = Subjects::new(Some(&claim), Some(handle), &fixture.env.domain);
    resources
        .link_gate(2, &subjects, &fixture.env.templates, now())
        .unwrap()
}

fn namespace_state(name: &str, phase: &str) -> Option<Value> {
    Some(json!({"metadata": {"name": name}, "status": {"phase": phase}}))
}

#[test]
fn a_resource_waits_while_its_linked_resource_has_no_state() {
    let fixture = Fixture::new(&[NAMESPACE, CONFIG]);
    let handle = linked_handle();
    // The first namespace has a state, but the link names the second (Δ B22).
    let states = [namespace_state("ns-1", "Active"), None, None];
    assert_eq!(
        gate(&fixture, &handle, &states),
        LinkGate::Waiting {
            linked_provider: "namespace".into()
        }
    );
}

#[test]
fn a_resource_waits_while_wait_for_is_false() {
    let fixture = Fixture::new(&[NAMESPACE, CONFIG]);
    let handle = linked_handle();
    let states = [None, namespace_state("ns-2", "Pending"), None];
    assert!(matches!(
        gate(&fixture, &handle, &states),
        LinkGate::Waiting { .. }
    ));
}

#[test]
fn a_resource_is_ready_with_template_vars_when_wait_for_holds() {
    let fixture = Fixture::new(&[NAMESPACE, CONFIG]);
    let handle = linked_handle();
    let states = [
        namespace_state("ns-1", "Pending"),
        namespace_state("ns-2", "Active"),
        None,
    ];
    // `missing` resolves to nothing and is left out.
    assert_eq!(
        gate(&fixture, &handle, &states),
        LinkGate::Ready(Map::from_iter([("ns_name".to_owned(), json!("ns-2"))]))
    );
}

#[test]
fn without_wait_for_template_vars_resolve_from_whatever_state_there_is() {
    let config = CONFIG.replace("    waitFor:", "    unused:");
    let fixture = Fixture::new(&[NAMESPACE, &config]);
    let handle = linked_handle();
    assert_eq!(
        gate(&fixture, &handle, &[None, None, None]),
        LinkGate::Ready(Map::new())
    );
    let states = [None, namespace_state("ns-2", "Pending"), None];
    assert_eq!(
        gate(&fixture, &handle, &states),
        LinkGate::Ready(Map::from_iter([("ns_name".to_owned(), json!("ns-2"))]))
    );
}

#[test]
fn a_link_to_a_provider_the_handle_does_not_use_is_skipped() {
    let config = CONFIG.replace("resourceName: second", "resourceName: third");
    let fixture = Fixture::new(&[NAMESPACE, &config]);
    assert_eq!(
        gate(&fixture, &linked_handle(), &[None, None, None]),
        LinkGate::Ready(Map::new())
    );
}

#[test]
fn a_failing_wait_for_is_an_error_naming_the_link() {
    let config = CONFIG.replace(
        "linked_resource_state.status.phase == wanted and",
        "(1 + 'x') and",
    );
    let fixture = Fixture::new(&[NAMESPACE, &config]);
    let handle = linked_handle();
    let providers = fixture.providers(&handle);
    let states = [None, namespace_state("ns-2", "Active"), None];
    let resources = HandleResources {
        handle: &handle,
        providers: &providers,
        states: &states,
    };
    let error = resources
        .link_gate(2, &Subjects::default(), &fixture.env.templates, now())
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("ResourceProvider config: linkedResourceProviders[0].waitFor failed: "),
        "{error}"
    );
    assert!(matches!(
        resources.link_gate(7, &Subjects::default(), &fixture.env.templates, now()),
        Err(DefinitionError::NoSuchResource(7))
    ));
}

use serde_json::{Value, json};

use super::*;
use crate::core::provider::schema::SchemaCache;
use crate::core::test_fixtures::{now, provider_with_spec};

/// A ConfigMap provider: the override gives kind and namespace, `data` comes from the template.
pub(crate) fn configmap_provider(name: &str, extra: Value) -> ResourceProvider {
    let mut spec = json!({
        "override": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"namespace": "managed"},
        },
    });
    if let (Value::Object(spec), Value::Object(extra)) = (&mut spec, extra) {
        spec.extend(extra);
    }
    provider_with_spec(name, spec)
}

pub(crate) struct Fixture {
    pub templates: TemplateEngine,
    pub schemas: SchemaCache,
    pub domain: OperatorDomain,
    pub catalog: ProviderCatalog,
}

impl Fixture {
    pub(crate) fn new(providers: Vec<ResourceProvider>) -> Self {
        let templates = TemplateEngine::new();
        let schemas = SchemaCache::default();
        let domain = OperatorDomain::default();
        let catalog = {
            let compiler = ProviderCompiler {
                domain: &domain,
                templates: &templates,
                schemas: &schemas,
            };
            ProviderCatalog::build(providers, &compiler)
        };
        Self {
            templates,
            schemas,
            domain,
            catalog,
        }
    }

    pub(crate) fn env(&self) -> PlanEnvironment<'_> {
        PlanEnvironment {
            catalog: &self.catalog,
            templates: &self.templates,
            domain: &self.domain,
            now: now(),
            render_at: now(),
        }
    }

    pub(crate) fn providers(&self, handle: &ResourceHandle) -> HandleProviders {
        let compiler = ProviderCompiler {
            domain: &self.domain,
            templates: &self.templates,
            schemas: &self.schemas,
        };
        HandleProviders::resolve(handle, &self.catalog, &compiler)
    }

    pub(crate) fn plan(
        &self,
        handle: &ResourceHandle,
        claim: Option<&ResourceClaim>,
        states: &[Option<Value>],
    ) -> Vec<ResourcePlan> {
        let providers = self.providers(handle);
        plan_resources(
            &self.env(),
            &PlanInput {
                handle,
                claim,
                providers: &providers,
                states,
                requester: None,
            },
        )
    }
}

/// A handle `guid-abcde` in `poolboy` with one resource entry per `(name, provider, template)`.
pub(crate) fn handle(resources: &[(&str, &str, Value)]) -> ResourceHandle {
    let resources: Vec<Value> = resources
        .iter()
        .map(|(name, provider, template)| {
            json!({
                "name": name,
                "provider": {
                    "apiVersion": "poolboy.gpte.redhat.com/v1",
                    "kind": "ResourceProvider",
                    "name": provider,
                    "namespace": "poolboy",
                },
                "template": template,
            })
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceHandle",
        "metadata": {
            "name": "guid-abcde",
            "generateName": "guid-",
            "namespace": "poolboy",
            "uid": "1111",
            "generation": 1,
        },
        "spec": {"resources": resources},
    }))
    .expect("valid handle")
}

pub(crate) fn claim(status_provider: Option<Value>) -> ResourceClaim {
    let mut claim = json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "test", "namespace": "user"},
        "spec": {},
    });
    if let Some(provider) = status_provider {
        claim["status"] = json!({"provider": provider});
    }
    serde_json::from_value(claim).expect("valid claim")
}

fn bind(handle: &mut ResourceHandle) {
    handle.spec.resource_claim = Some(crate::api::refs::ObjectRef {
        api_version: "poolboy.gpte.redhat.com/v1".into(),
        kind: "ResourceClaim".into(),
        name: "test".into(),
        namespace: "user".into(),
    });
}

fn definition(plan: &ResourcePlan) -> &Value {
    match plan {
        ResourcePlan::Apply { definition, .. } => definition,
        other => panic!("expected a definition, got {other:?}"),
    }
}

#[test]
fn a_resource_gets_a_guid_name_poolboy_annotations_and_a_reference() {
    let fixture = Fixture::new(vec![configmap_provider("cm", json!({}))]);
    let handle = handle(&[("config", "cm", json!({"data": {"a": "b"}}))]);
    let plans = fixture.plan(&handle, None, &[None]);
    let [
        ResourcePlan::Apply {
            definition,
            reference,
        },
    ] = plans.as_slice()
    else {
        panic!("one definition expected: {plans:?}");
    };
    assert_eq!(definition["metadata"]["name"], "guid0-abcde");
    assert_eq!(definition["data"]["a"], "b");
    let annotations = &definition["metadata"]["annotations"];
    assert_eq!(
        annotations["poolboy.gpte.redhat.com/resource-handle-name"],
        "guid-abcde"
    );
    assert_eq!(
        annotations["poolboy.gpte.redhat.com/resource-provider-name"],
        "cm"
    );
    assert_eq!(annotations["poolboy.gpte.redhat.com/resource-index"], "0");
    assert_eq!(
        reference,
        &ResourceReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "guid0-abcde".into(),
            namespace: Some("managed".into()),
        }
    );
}

#[test]
fn resources_that_require_a_claim_wait_until_the_handle_is_bound() {
    let fixture = Fixture::new(vec![configmap_provider(
        "cm",
        json!({"resourceRequiresClaim": true}),
    )]);
    let mut handle = handle(&[("config", "cm", json!({}))]);
    assert_eq!(
        fixture.plan(&handle, None, &[None]),
        vec![ResourcePlan::WaitingForClaim]
    );
    bind(&mut handle);
    let claim = claim(None);
    let plans = fixture.plan(&handle, Some(&claim), &[None]);
    let annotations = &definition(&plans[0])["metadata"]["annotations"];
    assert_eq!(
        annotations["poolboy.gpte.redhat.com/resource-claim-name"],
        "test"
    );
}

fn linked_fixture() -> Fixture {
    Fixture::new(vec![
        configmap_provider("base", json!({})),
        provider_with_spec(
            "app",
            json!({
                "linkedResourceProviders": [{
                    "name": "base",
                    "waitFor": "linked_resource_state.data.ready | default('') == 'yes'",
                    "templateVars": [{"name": "base_name", "from": "/metadata/name"}],
                }],
                "template": {"enable": true},
                "override": {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"namespace": "managed"},
                    "data": {"base": "{{ base_name }}"},
                },
            }),
        ),
    ])
}

#[test]
fn a_linked_resource_waits_for_its_link_then_gets_the_template_vars() {
    let fixture = linked_fixture();
    let handle = handle(&[("base", "base", json!({})), ("app", "app", json!({}))]);
    let plans = fixture.plan(&handle, None, &[None, None]);
    assert!(matches!(plans[0], ResourcePlan::Apply { .. }));
    assert_eq!(
        plans[1],
        ResourcePlan::WaitingForLink {
            linked_provider: "base".into()
        }
    );

    let not_yet = json!({"metadata": {"name": "guid0-abcde"}, "data": {"ready": "no"}});
    let plans = fixture.plan(&handle, None, &[Some(not_yet), None]);
    assert_eq!(
        plans[1],
        ResourcePlan::WaitingForLink {
            linked_provider: "base".into()
        }
    );

    let ready = json!({"metadata": {"name": "guid0-abcde"}, "data": {"ready": "yes"}});
    let plans = fixture.plan(&handle, None, &[Some(ready), None]);
    assert_eq!(definition(&plans[1])["data"]["base"], "guid0-abcde");
    assert_eq!(definition(&plans[1])["metadata"]["name"], "guid1-abcde");
}

/// A pass's watching engine tells whether a template read the claim: a handle whose
/// templates do not has nothing to render again when only its claim's status changes.
#[test]
fn the_watching_engine_tells_whether_a_template_read_the_claim() {
    let templated = |name: &str, data: &str| {
        provider_with_spec(
            name,
            json!({
                "template": {"enable": true},
                "override": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": data}},
            }),
        )
    };
    let fixture = Fixture::new(vec![
        configmap_provider("plain", json!({})),
        templated("guid", "{{ guid }}"),
        templated(
            "claimed",
            "{% if resource_claim %}{{ resource_claim.metadata.name }}{% endif %}",
        ),
    ]);
    let read_by = |provider: &str, claim: Option<&ResourceClaim>| {
        let mut handle = handle(&[(provider, provider, json!({}))]);
        bind(&mut handle);
        let watching = fixture.templates.watching();
        let env = PlanEnvironment {
            templates: &watching,
            ..fixture.env()
        };
        let providers = fixture.providers(&handle);
        let input = PlanInput {
            handle: &handle,
            claim,
            providers: &providers,
            states: &[None],
            requester: None,
        };
        let plans = plan_resources(&env, &input);
        assert!(matches!(plans[0], ResourcePlan::Apply { .. }), "{plans:?}");
        watching.claim_read()
    };
    let claim = claim(None);
    assert!(!read_by("plain", Some(&claim)));
    assert!(!read_by("guid", Some(&claim)));
    assert!(read_by("claimed", Some(&claim)));
    assert!(!read_by("claimed", None), "no claim to read");
    assert!(
        fixture.templates.claim_read(),
        "an engine that does not watch cannot tell"
    );
}

#[test]
fn a_bad_template_makes_only_its_resource_invalid() {
    let fixture = Fixture::new(vec![
        configmap_provider("good", json!({})),
        provider_with_spec(
            "bad",
            json!({
                "template": {"enable": true},
                "override": {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "data": {"x": "{{ no_such_variable }}"},
                },
            }),
        ),
    ]);
    let handle = handle(&[("bad", "bad", json!({})), ("good", "good", json!({}))]);
    let plans = fixture.plan(&handle, None, &[None, None]);
    let ResourcePlan::Invalid(message) = &plans[0] else {
        panic!("expected invalid: {plans:?}");
    };
    assert!(message.starts_with("spec.resources[0] (bad): ResourceProvider bad: override failed"));
    assert_eq!(plans[0].waiting_for(), Some(WaitingFor::ResourceDefinition));
    assert!(matches!(plans[1], ResourcePlan::Apply { .. }));
}

#[test]
fn a_missing_provider_makes_only_its_resource_invalid() {
    let fixture = Fixture::new(vec![configmap_provider("good", json!({}))]);
    let handle = handle(&[("gone", "gone", json!({})), ("good", "good", json!({}))]);
    let plans = fixture.plan(&handle, None, &[None, None]);
    assert_eq!(
        plans[0],
        ResourcePlan::Invalid("spec.resources[0] (gone): ResourceProvider gone not found".into())
    );
    assert_eq!(definition(&plans[1])["metadata"]["name"], "guid1-abcde");
}

#[test]
fn a_definition_without_kind_is_invalid() {
    let fixture = Fixture::new(vec![provider_with_spec(
        "nokind",
        json!({"override": {"apiVersion": "v1"}}),
    )]);
    let handle = handle(&[("x", "nokind", json!({}))]);
    let plans = fixture.plan(&handle, None, &[None]);
    let ResourcePlan::Invalid(message) = &plans[0] else {
        panic!("expected invalid: {plans:?}");
    };
    assert!(message.contains("without a kind"), "{message}");
}

#[test]
fn the_status_reference_pins_the_name_and_forbids_a_kind_change() {
    let fixture = Fixture::new(vec![configmap_provider("cm", json!({}))]);
    let mut handle = handle(&[("config", "cm", json!({}))]);
    handle.status = Some(serde_json::from_value(json!({"resources": [{
        "reference": {"apiVersion": "v1", "kind": "ConfigMap", "name": "kept", "namespace": "old"},
    }]})).expect("status"));
    let plans = fixture.plan(&handle, None, &[None]);
    assert_eq!(definition(&plans[0])["metadata"]["name"], "kept");
    assert_eq!(definition(&plans[0])["metadata"]["namespace"], "old");

    handle.status = Some(
        serde_json::from_value(json!({"resources": [{
            "reference": {"apiVersion": "v1", "kind": "Secret", "name": "kept"},
        }]}))
        .expect("status"),
    );
    let plans = fixture.plan(&handle, None, &[None]);
    assert!(matches!(&plans[0], ResourcePlan::Invalid(m) if m.contains("Unable to change kind")));
}

#[test]
fn reference_of_requires_strings() {
    let reference = reference_of(&json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "namespace": ""},
    }))
    .expect("a reference");
    assert_eq!(reference.namespace, None);
    assert!(reference_of(&json!({"apiVersion": "v1", "kind": "X", "metadata": {}})).is_none());
    assert!(
        reference_of(&json!({
            "apiVersion": "v1", "kind": "X", "metadata": {"name": "n", "namespace": 3},
        }))
        .is_none()
    );
}

fn parameterised_fixture() -> Fixture {
    Fixture::new(vec![configmap_provider(
        "param",
        json!({
            "parameters": [
                {"name": "size", "default": {"value": "small"}},
                {"name": "colour", "default": {"value": "red"}},
            ],
            "template": {
                "enable": true,
                "definition": {"data": {"size": "{{ size }}", "colour": "{{ colour }}"}},
            },
        }),
    )])
}

fn with_provider(mut handle: ResourceHandle, values: Value) -> ResourceHandle {
    handle.spec.provider = Some(
        serde_json::from_value(json!({
            "name": "param",
            "parameterValues": values,
        }))
        .expect("provider"),
    );
    handle
}

fn generated_templates(generated: &GeneratedResources) -> Value {
    let ops = serde_json::to_value(&generated.patch).expect("serialises");
    ops[0]["value"].clone()
}

#[test]
fn an_unbound_handle_generates_from_its_own_values_plus_defaults() {
    let fixture = parameterised_fixture();
    let handle = with_provider(handle(&[]), json!({"size": "large"}));
    let mut handle = handle;
    handle.spec.resources = None;
    let generated = generated_resources(&fixture.env(), &handle, None)
        .expect("generates")
        .expect("has spec.provider");
    let resources = generated_templates(&generated);
    assert_eq!(
        resources[0]["template"]["data"],
        json!({"size": "large", "colour": "red"})
    );
    assert_eq!(resources[0]["name"], "param");
}

#[test]
fn a_bound_handle_generates_from_the_provider_claims_values() {
    let fixture = parameterised_fixture();
    let mut handle = with_provider(handle(&[]), json!({"size": "large"}));
    handle.spec.resources = None;
    bind(&mut handle);
    let provider_claim = claim(Some(
        json!({"name": "param", "parameterValues": {"colour": "blue"}}),
    ));
    let generated = generated_resources(&fixture.env(), &handle, Some(&provider_claim))
        .expect("generates")
        .expect("has spec.provider");
    let resources = generated_templates(&generated);
    // Poolboy: the claim's values replace the handle's; defaults fill the rest.
    assert_eq!(
        resources[0]["template"]["data"],
        json!({"size": "small", "colour": "blue"})
    );

    // A claim that is not a provider claim has no values: the handle's are used.
    let resources_claim = claim(None);
    let generated = generated_resources(&fixture.env(), &handle, Some(&resources_claim))
        .expect("generates")
        .expect("has spec.provider");
    let resources = generated_templates(&generated);
    assert_eq!(
        resources[0]["template"]["data"],
        json!({"size": "large", "colour": "red"})
    );
}

#[test]
fn generation_is_a_no_op_when_up_to_date_and_fails_without_provider() {
    let fixture = parameterised_fixture();
    let template = json!({"data": {"size": "small", "colour": "red"}});
    let handle = with_provider(handle(&[("param", "param", template)]), json!({}));
    let generated = generated_resources(&fixture.env(), &handle, None)
        .expect("generates")
        .expect("has spec.provider");
    assert!(generated.patch.0.is_empty());
    assert!(generated.refused.is_empty());

    let plain = super::tests::handle(&[]);
    assert!(
        generated_resources(&fixture.env(), &plain, None)
            .expect("ok")
            .is_none()
    );

    let mut missing = plain;
    missing.spec.provider =
        Some(serde_json::from_value(json!({"name": "gone"})).expect("provider"));
    let error = generated_resources(&fixture.env(), &missing, None).expect_err("missing provider");
    assert_eq!(
        error.to_string(),
        "spec.provider: ResourceProvider gone not found"
    );
}

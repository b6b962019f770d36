//! The definition of each managed resource, from its handle entry and provider (§12.3,
//! Δ§3.2), and the linked-provider gate in front of it (§9, Δ B22).

use serde_json::{Map, Value, json};

use crate::api::refs::ResourceReference;
use crate::api::{OperatorDomain, ResourceHandle};
use crate::core::json::merge::{MergeMode, deep_merge};
use crate::core::naming;
use crate::core::provider::CompiledProvider;
use crate::core::template::RenderContext;
use crate::core::template::view::{Subjects, provider_view};
use crate::core::template::{TemplateEngine, TemplateError};

#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum DefinitionError {
    #[error("ResourceHandle has no spec.resources[{0}]")]
    NoSuchResource(usize),
    #[error("ResourceProvider {provider}: override failed: {source}")]
    Override {
        provider: String,
        #[source]
        source: Box<TemplateError>,
    },
    #[error(
        "ResourceProvider {provider}: linkedResourceProviders[{index}].waitFor failed: {source}"
    )]
    WaitFor {
        provider: String,
        index: usize,
        #[source]
        source: Box<TemplateError>,
    },
    #[error(
        "Template processing by ResourceProvider {provider} for ResourceHandle {handle} produced definition without {field}"
    )]
    Missing {
        provider: String,
        handle: String,
        field: &'static str,
    },
    #[error("Template processing produced a definition that is not an object")]
    NotAnObject,
    #[error("Unable to change {field} for resource {name} from {from} to {to}")]
    Immutable {
        field: &'static str,
        name: String,
        from: String,
        to: String,
    },
}

/// The requester of a claim, looked up from its namespace (§12.3 step 7): an OpenShift
/// `User` and its `Identity` objects. Absent on plain Kubernetes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Requester {
    pub user: Option<Value>,
    pub identities: Vec<Value>,
}

/// Whether a resource may be rendered now, and the linked template variables if so.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum LinkGate {
    /// Every `waitFor` holds; `templateVars` resolved from the linked resources' states.
    Ready(Map<String, Value>),
    /// A linked resource has no state yet or its `waitFor` is false.
    Waiting { linked_provider: String },
}

/// One handle's resources with their providers and live states, index-aligned.
pub(crate) struct HandleResources<'a> {
    pub handle: &'a ResourceHandle,
    pub providers: &'a [&'a CompiledProvider],
    pub states: &'a [Option<Value>],
}

impl HandleResources<'_> {
    fn name_at(&self, index: usize) -> Option<String> {
        let resources = self.handle.spec.resources.as_deref().unwrap_or(&[]);
        resources.get(index).and_then(|r| r.name.clone())
    }

    fn state_at(&self, index: usize) -> Option<&Value> {
        self.states.get(index).and_then(Option::as_ref)
    }

    /// Checks the linked providers of resource `index` (§9): each link is found as the first
    /// resource of this handle with the same provider name and resource name (Δ B22); a
    /// `waitFor` without linked state, or false, makes the resource wait.
    pub(crate) fn link_gate(
        &self,
        index: usize,
        subjects: &Subjects,
        templates: &TemplateEngine,
        domain: &OperatorDomain,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<LinkGate, DefinitionError> {
        let Some(provider) = self.providers.get(index) else {
            return Err(DefinitionError::NoSuchResource(index));
        };
        let spec = provider.spec();
        let mut template_vars = Map::new();
        for (link_index, link) in spec.linked_resource_providers.iter().flatten().enumerate() {
            let wanted_name = link.resource_name.as_deref().unwrap_or(&link.name);
            let linked = self.providers.iter().enumerate().find(|(i, p)| {
                p.name() == link.name
                    && self.name_at(*i).as_deref().unwrap_or(p.name()) == wanted_name
            });
            let Some((linked_index, linked_provider)) = linked else {
                // Poolboy only logs this: a link to a provider the handle does not use.
                continue;
            };
            let linked_state = self.state_at(linked_index);
            let resolved: Map<String, Value> = link
                .template_vars
                .iter()
                .flatten()
                .filter_map(|var| {
                    let value = linked_state.and_then(|s| s.pointer(&var.from))?;
                    Some((var.name.clone(), value.clone()))
                })
                .collect();
            if let Some(wait_for) = &link.wait_for {
                let Some(linked_state) = linked_state else {
                    return Ok(LinkGate::Waiting {
                        linked_provider: link.name.clone(),
                    });
                };
                let scope = RenderContext::new(now, &serde_json::Map::new())
                    .with_variable(
                        "linked_resource_provider",
                        provider_view(linked_provider.resource(), domain),
                    )
                    .with_variable("linked_resource_state", linked_state.clone())
                    .with_variable("resource_claim", subjects.claim.clone())
                    .with_variable("resource_handle", subjects.handle.clone())
                    .with_variable(
                        "resource_provider",
                        provider_view(provider.resource(), domain),
                    )
                    .with_variable(
                        "resource_state",
                        self.state_at(index).cloned().unwrap_or(Value::Null),
                    )
                    .with_variables(&resolved)
                    .with_template_variables(spec.vars.as_ref())
                    .with_template_variables(subjects.handle_vars.as_ref());
                let holds = templates.check(wait_for, &scope).map_err(|source| {
                    DefinitionError::WaitFor {
                        provider: provider.name().to_owned(),
                        index: link_index,
                        source: Box::new(source),
                    }
                })?;
                if !holds {
                    return Ok(LinkGate::Waiting {
                        linked_provider: link.name.clone(),
                    });
                }
            }
            template_vars.extend(resolved);
        }
        Ok(LinkGate::Ready(template_vars))
    }

    /// The definition of resource `index` (§12.3): the handle's template, the provider's
    /// `override` merged over it, a generated name, the reference pinned, and Poolboy's
    /// annotations and the handle's resource labels and annotations added.
    pub(crate) fn definition(
        &self,
        index: usize,
        linked_vars: &Map<String, Value>,
        context: &DefinitionContext<'_>,
    ) -> Result<Value, DefinitionError> {
        let handle = self.handle;
        let resources = handle.spec.resources.as_deref().unwrap_or(&[]);
        let (Some(entry), Some(provider)) = (resources.get(index), self.providers.get(index))
        else {
            return Err(DefinitionError::NoSuchResource(index));
        };
        let spec = provider.spec();
        let handle_name = handle.metadata.name.clone().unwrap_or_default();
        let guid = naming::handle_guid(&handle_name, handle.metadata.generate_name.as_deref());
        let references = status_references(handle);
        let reference = references.get(index).cloned().flatten();
        let mut definition = entry.template.clone().unwrap_or_else(|| json!({}));

        if let Some(override_) = &spec.override_ {
            let rendered = if spec.template_enabled() {
                let templates_list: Vec<Value> = resources
                    .iter()
                    .map(|r| r.template.clone().unwrap_or(Value::Null))
                    .collect();
                let mut scope = RenderContext::new(context.now, &serde_json::Map::new())
                    .with_variables(handle.spec.vars.as_ref().unwrap_or(&Map::new()))
                    .with_variables(linked_vars)
                    .with_variable("guid", json!(guid));
                // Without a requester (plain Kubernetes, or no requester annotation) the
                // variables are absent, so `default()` and `is defined` work (§16: Poolboy
                // crashed there).
                if let Some(requester) = context.requester {
                    scope =
                        scope.with_variable("requester_identities", json!(requester.identities));
                    if let Some(identity) = requester.identities.first() {
                        scope = scope.with_variable("requester_identity", identity);
                    }
                    if let Some(user) = &requester.user {
                        scope = scope.with_variable("requester_user", user);
                    }
                }
                let scope = scope
                    .with_variable(
                        "resource_provider",
                        provider_view(provider.resource(), context.domain),
                    )
                    .with_variable("resource_handle", context.subjects.handle.clone())
                    .with_variable("resource_claim", context.subjects.claim.clone())
                    .with_variable("resource_index", json!(index))
                    .with_variable("resource_name", json!(entry.name))
                    .with_variable(
                        "resource_reference",
                        reference.as_ref().map_or_else(|| json!({}), |r| json!(r)),
                    )
                    .with_variable("resource_references", json!(references))
                    .with_variable(
                        "resource_state",
                        self.state_at(index).cloned().unwrap_or(Value::Null),
                    )
                    .with_variable("resource_states", json!(self.states))
                    .with_variable(
                        "resource_template",
                        entry.template.clone().unwrap_or(Value::Null),
                    )
                    .with_variable("resource_templates", Value::Array(templates_list))
                    .with_template_variables(spec.vars.as_ref())
                    .with_template_variables(handle.spec.vars.as_ref());
                context
                    .templates
                    .render(override_, &scope)
                    .map_err(|source| DefinitionError::Override {
                        provider: provider.name().to_owned(),
                        source: Box::new(source),
                    })?
            } else {
                override_.clone()
            };
            deep_merge(&mut definition, &rendered, MergeMode::Overwrite);
        }

        let Value::Object(object) = &mut definition else {
            return Err(DefinitionError::NotAnObject);
        };
        for field in ["apiVersion", "kind"] {
            if !object.get(field).is_some_and(Value::is_string) {
                return Err(DefinitionError::Missing {
                    provider: provider.name().to_owned(),
                    handle: handle_name.clone(),
                    field: if field == "kind" {
                        "a kind"
                    } else {
                        "an apiVersion"
                    },
                });
            }
        }
        let metadata = object_at(object, "metadata");
        if !metadata.contains_key("name") {
            let generated = naming::resource_name(
                metadata.get("generateName").and_then(Value::as_str),
                index,
                guid,
            );
            metadata.insert("generateName".to_owned(), json!(generated.generate_name));
            metadata.insert("name".to_owned(), json!(generated.name));
        }
        if let Some(reference) = &reference {
            metadata.insert("name".to_owned(), json!(reference.name));
            if let Some(namespace) = &reference.namespace {
                metadata.insert("namespace".to_owned(), json!(namespace));
            }
        }
        let annotations = object_at(metadata, "annotations");
        for (key, value) in handle.spec.resource_annotations.iter().flatten() {
            annotations.insert(key.clone(), json!(value));
        }
        let domain = context.domain;
        let mut poolboy = vec![
            (domain.resource_provider_name(), provider.name().to_owned()),
            (
                domain.resource_provider_namespace(),
                provider
                    .resource()
                    .metadata
                    .namespace
                    .clone()
                    .unwrap_or_default(),
            ),
            (domain.resource_handle_name(), handle_name.clone()),
            (
                domain.resource_handle_namespace(),
                handle.metadata.namespace.clone().unwrap_or_default(),
            ),
            (
                domain.resource_handle_uid(),
                handle.metadata.uid.clone().unwrap_or_default(),
            ),
            (domain.resource_index(), index.to_string()),
        ];
        if let Some(claim) = &handle.spec.resource_claim {
            poolboy.push((domain.resource_claim_name(), claim.name.clone()));
            poolboy.push((domain.resource_claim_namespace(), claim.namespace.clone()));
        }
        if let Some(pool) = &handle.spec.resource_pool {
            poolboy.push((domain.resource_pool_name(), pool.name.clone()));
            poolboy.push((domain.resource_pool_namespace(), pool.namespace.clone()));
        }
        if let Some(requester) = context.requester {
            let user = requester.user.as_ref();
            if let Some(name) = user
                .and_then(|u| u.pointer("/metadata/name"))
                .and_then(Value::as_str)
            {
                poolboy.push((domain.resource_requester_user(), name.to_owned()));
            }
            if let Some(identity) = requester.identities.first() {
                let extra = |key: &str| {
                    identity
                        .pointer(&format!("/extra/{key}"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                poolboy.push((domain.resource_requester_email(), extra("email")));
                poolboy.push((domain.resource_requester_name(), extra("name")));
                poolboy.push((
                    domain.resource_requester_preferred_username(),
                    extra("preferred_username"),
                ));
            }
        }
        for (key, value) in poolboy {
            annotations.insert(key, json!(value));
        }
        if let Some(labels) = &handle.spec.resource_labels
            && !labels.is_empty()
        {
            let target = object_at(metadata_mut(object), "labels");
            for (key, value) in labels {
                target.insert(key.clone(), json!(value));
            }
        }

        if let Some(reference) = &reference {
            for (field, expected) in [
                ("apiVersion", &reference.api_version),
                ("kind", &reference.kind),
            ] {
                let actual = object
                    .get(field)
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if actual != expected {
                    return Err(DefinitionError::Immutable {
                        field,
                        name: reference.name.clone(),
                        from: expected.clone(),
                        to: actual.to_owned(),
                    });
                }
            }
        }
        Ok(definition)
    }
}

/// What rendering a definition needs besides the handle.
pub(crate) struct DefinitionContext<'a> {
    pub domain: &'a OperatorDomain,
    pub templates: &'a TemplateEngine,
    pub subjects: &'a Subjects,
    pub requester: Option<&'a Requester>,
    pub now: chrono::DateTime<chrono::Utc>,
}

/// The reference of each resource: `status.resources[i].reference` (Δ§2.4), falling back to
/// the spec copy legacy handles carry.
pub(crate) fn status_references(handle: &ResourceHandle) -> Vec<Option<ResourceReference>> {
    let spec = handle.spec.resources.as_deref().unwrap_or(&[]);
    let status = handle
        .status
        .as_ref()
        .and_then(|s| s.resources.as_deref())
        .unwrap_or(&[]);
    (0..spec.len())
        .map(|i| {
            status
                .get(i)
                .and_then(|s| s.reference.clone())
                .or_else(|| spec.get(i).and_then(|r| r.reference.clone()))
        })
        .collect()
}

fn metadata_mut(object: &mut Map<String, Value>) -> &mut Map<String, Value> {
    object_at(object, "metadata")
}

/// The object under `key`, created (or replaced, if not an object) as needed.
fn object_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = map.entry(key.to_owned()).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    match slot {
        Value::Object(inner) => inner,
        _ => unreachable!("just made an object"),
    }
}

#[cfg(test)]
mod tests {
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

        let handle =
            one_resource_handle("{apiVersion: v1, kind: ConfigMap, metadata: {name: fixed}}");
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
            .link_gate(
                2,
                &subjects,
                &fixture.env.templates,
                &fixture.env.domain,
                now(),
            )
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
            .link_gate(
                2,
                &Subjects::default(),
                &fixture.env.templates,
                &fixture.env.domain,
                now(),
            )
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(
                "ResourceProvider config: linkedResourceProviders[0].waitFor failed: "
            ),
            "{error}"
        );
        assert!(matches!(
            resources.link_gate(
                7,
                &Subjects::default(),
                &fixture.env.templates,
                &fixture.env.domain,
                now()
            ),
            Err(DefinitionError::NoSuchResource(7))
        ));
    }
}

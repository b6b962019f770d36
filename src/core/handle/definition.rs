//! The definition of each managed resource, from its handle entry and provider (§12.3,
//! Δ§3.2), and the linked-provider gate in front of it (§9, Δ B22).

use serde_json::{Map, Value, json};

use crate::api::refs::ResourceReference;
use crate::api::{OperatorDomain, ResourceHandle};
use crate::core::json::merge::{MergeMode, deep_merge};
use crate::core::naming;
use crate::core::pool::HandleParts;
use crate::core::provider::CompiledProvider;
use crate::core::template::RenderContext;
use crate::core::template::view::Subjects;
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
                    .with_variable("linked_resource_provider", linked_provider.view())
                    .with_variable("linked_resource_state", linked_state.clone())
                    .with_variable("resource_claim", &subjects.claim)
                    .with_variable("resource_handle", &subjects.handle)
                    .with_variable("resource_provider", provider.view())
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
                    .with_variable("resource_provider", provider.view())
                    .with_variable("resource_handle", &context.subjects.handle)
                    .with_variable("resource_claim", &context.subjects.claim)
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
/// the spec copy legacy handles carry. `handle` as core sees it, or as a store keeps it.
pub(crate) fn status_references<'a>(
    handle: impl Into<HandleParts<'a>>,
) -> Vec<Option<ResourceReference>> {
    let handle = handle.into();
    let spec = handle.spec.resources.as_deref().unwrap_or(&[]);
    let status = handle
        .status
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
mod tests;

//! What one handle reconcile does with its resources (Poolboy 1.12 §12.4, 1.17 Δ§3.2 "Manage"):
//! regenerate `spec.resources` from `spec.provider`, then decide per resource whether it waits
//! (for a claim, for a linked resource), cannot be rendered (bad input, reported), or has a
//! definition to create or patch.

use std::sync::Arc;

use json_patch::Patch;
use serde_json::Value;

use crate::api::refs::{ResourceReference, WaitingFor};
use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle, ResourceProvider};
use crate::core::handle::definition::{DefinitionContext, HandleResources, LinkGate, Requester};
use crate::core::handle::desired::{DesiredResourcesError, Generation};
use crate::core::handle::generated::sync_generated_resources;
use crate::core::provider::{CompiledProvider, ProviderCatalog, ProviderCompiler, ProviderError};
use crate::core::template::ClockReading;
use crate::core::template::TemplateEngine;
use crate::core::template::view::Subjects;

#[cfg(test)]
pub(crate) mod tests;

/// Why `spec.resources` cannot be regenerated from `spec.provider`.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum HandlePlanError {
    #[error("spec.provider: {0}")]
    Provider(#[from] ProviderError),
    #[error("spec.provider: {0}")]
    Generation(#[from] DesiredResourcesError),
}

/// What every decision of a handle reconcile reads besides the handle.
pub(crate) struct PlanEnvironment<'a> {
    pub catalog: &'a ProviderCatalog,
    pub templates: &'a TemplateEngine,
    pub domain: &'a OperatorDomain,
    /// The clock's time: when a condition changes.
    pub now: chrono::DateTime<chrono::Utc>,
    /// The instant the templates render at: `now`, or the one they last read while it holds
    /// (`core::template::ClockPin`).
    pub render_at: chrono::DateTime<chrono::Utc>,
}

/// The change to `spec.resources` a handle with `spec.provider` needs, and the entries left
/// alone because their provider would change.
#[derive(Debug)]
pub(crate) struct GeneratedResources {
    /// Empty when `spec.resources` is already what the provider generates.
    pub patch: Patch,
    /// One message per entry whose provider would change (Poolboy patches anyway, §16).
    pub refused: Vec<String>,
}

/// Regenerates `spec.resources` of a handle with `spec.provider` (§9 "In the handle", Δ§3.2
/// step 4); `None` for a handle without `spec.provider`.
///
/// The parameter values are the bound claim's `status.provider.parameterValues` (Poolboy's
/// `resource_claim.parameter_values`); a bound claim that is not a provider claim has none, so
/// the handle's own values are used then rather than bare defaults. Unbound handles use their
/// own `spec.provider.parameterValues`. Defaults are added by [`Generation::resources`].
pub(crate) fn generated_resources(
    env: &PlanEnvironment<'_>,
    handle: &ResourceHandle,
    claim: Option<&ResourceClaim>,
) -> Result<Option<GeneratedResources>, HandlePlanError> {
    let Some(handle_provider) = &handle.spec.provider else {
        return Ok(None);
    };
    let provider = env.catalog.get(&handle_provider.name)?;
    // The claim's status gives the parameter values.
    if claim.is_some() {
        env.templates.note_claim_read();
    }
    let claim_values = claim
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.provider.as_ref())
        .map(|p| p.parameter_values.clone().unwrap_or_default());
    let values = claim_values.or_else(|| handle_provider.parameter_values.clone());
    let subjects = Subjects::noting(claim, Some(handle), env.domain, env.templates);
    let generation = Generation {
        catalog: env.catalog,
        templates: env.templates,
        domain: env.domain,
        subjects: &subjects,
        now: env.render_at,
    };
    let generated = generation.resources(provider, values.as_ref())?;
    let (patch, refused) = sync_generated_resources(handle.spec.resources.as_deref(), &generated);
    let refused = refused
        .into_iter()
        .map(|r| {
            format!(
                "spec.resources[{}]: ResourceProvider {} would generate it, but it was made by ResourceProvider {}; left unchanged",
                r.index, r.generated, r.current
            )
        })
        .collect();
    Ok(Some(GeneratedResources { patch, refused }))
}

/// The providers of a handle's resources, index-aligned with `spec.resources`. A missing or
/// invalid provider is represented by an empty stand-in of the same name (so that linked
/// lookups of the other resources still line up and find no state) and its error.
pub(crate) struct HandleProviders {
    providers: Vec<Arc<CompiledProvider>>,
    errors: Vec<Option<ProviderError>>,
}

impl HandleProviders {
    pub(crate) fn resolve(
        handle: &ResourceHandle,
        catalog: &ProviderCatalog,
        compiler: &ProviderCompiler<'_>,
    ) -> Self {
        let mut providers = Vec::new();
        let mut errors = Vec::new();
        for entry in handle.spec.resources.iter().flatten() {
            match catalog.get(&entry.provider.name) {
                Ok(provider) => {
                    providers.push(provider.clone());
                    errors.push(None);
                }
                Err(error) => {
                    let mut stand_in =
                        ResourceProvider::new(&entry.provider.name, Default::default());
                    stand_in.metadata.namespace = Some(entry.provider.namespace.clone());
                    match compiler.compile(stand_in) {
                        Ok(compiled) => providers.push(Arc::new(compiled)),
                        // An empty provider always compiles; were it not to, the resources
                        // from here on would have no provider and be reported as invalid.
                        Err(_) => break,
                    }
                    errors.push(Some(error));
                }
            }
        }
        Self { providers, errors }
    }

    /// The providers, index-aligned (stand-ins where [`error`](Self::error) is set).
    pub(crate) fn all(&self) -> Vec<&CompiledProvider> {
        self.providers.iter().map(AsRef::as_ref).collect()
    }

    /// Why resource `index` has no usable provider.
    pub(crate) fn error(&self, index: usize) -> Option<&ProviderError> {
        self.errors.get(index).and_then(Option::as_ref)
    }

    /// The provider of resource `index`, if it is usable.
    pub(crate) fn get(&self, index: usize) -> Option<&CompiledProvider> {
        match self.error(index) {
            Some(_) => None,
            None => self.providers.get(index).map(AsRef::as_ref),
        }
    }
}

/// What happens to one resource in this reconcile (§12.4 step 6).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ResourcePlan {
    /// Not rendered before the handle is bound (`resourceRequiresClaim`, §12.4 step 6.1).
    WaitingForClaim,
    /// Not rendered before the resource of `linked_provider` has a state that passes its
    /// `waitFor` (§9).
    WaitingForLink { linked_provider: String },
    /// The definition cannot be produced: bad input, reported (and `waitingFor: Resource
    /// Definition`, Poolboy's value for a resource without definition).
    Invalid(String),
    /// Create the resource, or patch it with the filtered diff if it exists.
    Apply {
        definition: Value,
        reference: ResourceReference,
    },
}

impl ResourcePlan {
    /// The `waitingFor` this plan leaves in `status.resources[i]`.
    pub(crate) fn waiting_for(&self) -> Option<WaitingFor> {
        match self {
            ResourcePlan::WaitingForClaim => Some(WaitingFor::ResourceClaim),
            ResourcePlan::WaitingForLink { .. } => Some(WaitingFor::LinkedResourceProvider),
            ResourcePlan::Invalid(_) => Some(WaitingFor::ResourceDefinition),
            ResourcePlan::Apply { .. } => None,
        }
    }
}

/// A handle's resources as one reconcile sees them.
pub(crate) struct PlanInput<'a> {
    pub handle: &'a ResourceHandle,
    /// The bound claim (fresh), if any.
    pub claim: Option<&'a ResourceClaim>,
    pub providers: &'a HandleProviders,
    /// The live object of each resource, index-aligned; `None` where there is none (yet).
    pub states: &'a [Option<Value>],
    pub requester: Option<&'a Requester>,
}

/// Decides, per resource in index order, whether it waits, is invalid or gets a definition
/// (§12.4 step 6, Δ§3.2 Manage step 6). Never fails as a whole: a problem belongs to the
/// resource it comes from, and the other resources are still served.
pub(crate) fn plan_resources(
    env: &PlanEnvironment<'_>,
    input: &PlanInput<'_>,
) -> Vec<ResourcePlan> {
    plan_resources_timed(env, input)
        .into_iter()
        .map(|(plan, _)| plan)
        .collect()
}

/// [`plan_resources`], with what each resource's rendering made of the clock: when its plan
/// would change next (`poolboy render --at` shows it). The readings also reach the
/// environment's engine, as with [`plan_resources`].
pub(crate) fn plan_resources_timed(
    env: &PlanEnvironment<'_>,
    input: &PlanInput<'_>,
) -> Vec<(ResourcePlan, ClockReading)> {
    let handle = input.handle;
    let entries = handle.spec.resources.as_deref().unwrap_or(&[]);
    let providers = input.providers.all();
    let subjects = Subjects::noting(input.claim, Some(handle), env.domain, env.templates);
    let resources = HandleResources {
        handle,
        providers: &providers,
        states: input.states,
    };
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let templates = env.templates.watching();
            let context = DefinitionContext {
                domain: env.domain,
                templates: &templates,
                subjects: &subjects,
                requester: input.requester,
                now: env.render_at,
            };
            let label = match &entry.name {
                Some(name) => format!("spec.resources[{index}] ({name})"),
                None => format!("spec.resources[{index}]"),
            };
            let plan = plan_one(index, &label, env, input, &providers, &resources, &context);
            env.templates.absorb(&templates);
            (plan, templates.clock_reading())
        })
        .collect()
}

fn plan_one(
    index: usize,
    label: &str,
    env: &PlanEnvironment<'_>,
    input: &PlanInput<'_>,
    providers: &[&CompiledProvider],
    resources: &HandleResources<'_>,
    context: &DefinitionContext<'_>,
) -> ResourcePlan {
    if let Some(error) = input.providers.error(index) {
        return ResourcePlan::Invalid(format!("{label}: {error}"));
    }
    let Some(provider) = providers.get(index) else {
        return ResourcePlan::Invalid(format!("{label}: no ResourceProvider"));
    };
    // §12.4 step 6.1: resources that need claim data wait for the bind.
    if provider.spec().resource_requires_claim.unwrap_or(false)
        && input.handle.spec.resource_claim.is_none()
    {
        return ResourcePlan::WaitingForClaim;
    }
    let gate = resources.link_gate(index, context.subjects, context.templates, env.render_at);
    let linked_vars = match gate {
        Err(error) => return ResourcePlan::Invalid(format!("{label}: {error}")),
        Ok(LinkGate::Waiting { linked_provider }) => {
            return ResourcePlan::WaitingForLink { linked_provider };
        }
        Ok(LinkGate::Ready(vars)) => vars,
    };
    match resources.definition(index, &linked_vars, context) {
        Err(error) => ResourcePlan::Invalid(format!("{label}: {error}")),
        Ok(definition) => match reference_of(&definition) {
            Some(reference) => ResourcePlan::Apply {
                definition,
                reference,
            },
            None => ResourcePlan::Invalid(format!(
                "{label}: the definition's metadata.name and metadata.namespace must be strings"
            )),
        },
    }
}

/// `{apiVersion, kind, name, namespace?}` of a definition; `None` when a field is not a string.
pub(crate) fn reference_of(definition: &Value) -> Option<ResourceReference> {
    let text = |pointer: &str| definition.pointer(pointer).and_then(Value::as_str);
    let namespace = match definition.pointer("/metadata/namespace") {
        None | Some(Value::Null) => None,
        Some(Value::String(namespace)) if namespace.is_empty() => None,
        Some(Value::String(namespace)) => Some(namespace.clone()),
        Some(_) => return None,
    };
    Some(ResourceReference {
        api_version: text("/apiVersion")?.to_owned(),
        kind: text("/kind")?.to_owned(),
        name: text("/metadata/name")?.to_owned(),
        namespace,
    })
}

//! What the claim controller decides about a claim before it touches a handle (§6, §7 steps
//! 3–7, §8): which providers serve it, the initialisation to write once (§6.3), whether its
//! values are valid, and the resources a handle for it must hold. Also the name of the handle
//! created for it, whether creating one is allowed (Δ§2.3), and what the resolved claim does
//! to a handle: which unbound handles it may bind, the bind patch, the handle created for it,
//! and the claim edits its bound handle receives. The claim controller and `poolboy render`
//! both decide through these, so that the offline render cannot drift from the operator.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value, json};

use crate::api::claim::{ClaimStatusProvider, ResourceClaimStatus};
use crate::api::refs::{ProviderParameters, ProviderRef};
use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle};
use crate::core::binding::bind::{BindPlan, bind_patch};
use crate::core::binding::matching::{self, BindCandidate, MatchError, MatchIgnore};
use crate::core::claim::gates::{ApprovalGate, approval_gate};
use crate::core::claim::parameters::validate_parameters;
use crate::core::claim::providers::{self, AssignmentError, ClaimShape};
use crate::core::claim::to_handle::{Propagation, propagate_claim_to_handle};
use crate::core::handle::desired::{DesiredResource, DesiredResourcesError, Generation};
use crate::core::handle::new::{ClaimHandleInput, HandleForClaim, handle_for_claim};
use crate::core::lifespan::values::{LifespanValueError, handle_lifespan, provider_lifespan};
use crate::core::lifespan::{LifespanError, format_timestamp};
use crate::core::provider::{CompiledProvider, ProviderCatalog};
use crate::core::template::view::Subjects;
use crate::core::template::{RenderContext, TemplateEngine};

#[cfg(test)]
mod tests;

/// Why a claim cannot even be validated: its shape, a provider that is missing or broken, or a
/// provider's template that fails. Reported in the claim's status; not retried until the claim
/// or a provider changes.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ResolveError {
    #[error(transparent)]
    Claim(#[from] AssignmentError),
    #[error("cannot generate the claim's resources: {0}")]
    Resources(#[from] DesiredResourcesError),
    /// A provider's or the handle's lifespan template fails for this claim.
    #[error(transparent)]
    LifespanValue(#[from] LifespanValueError),
    /// The lifespan rules refuse the claim's or the handle's values (§10).
    #[error(transparent)]
    Lifespan(#[from] LifespanError),
}

/// What resolving a claim needs.
pub(crate) struct ResolveInput<'a> {
    pub claim: &'a ResourceClaim,
    /// The bound handle, if any: validation checks see it as `resource_handle`.
    pub handle: Option<&'a ResourceHandle>,
    pub catalog: &'a ProviderCatalog,
    pub templates: &'a TemplateEngine,
    pub domain: &'a OperatorDomain,
    pub now: DateTime<Utc>,
}

/// One `status.resources` entry as the claim's providers define it; the handle adds the rest.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlannedResource {
    pub name: Option<String>,
    pub provider: ProviderRef,
    /// The template's validation failure (§7 step 6); `None` clears a previous one.
    pub validation_error: Option<String>,
}

/// A claim resolved against its providers, initialised and validated.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedClaim {
    pub shape: ClaimShape,
    /// The claim as it is once initialised (annotation and defaulted templates, §6.3).
    pub claim: ResourceClaim,
    /// The merge patch that initialises the claim, when it was not initialised yet.
    pub initialisation: Option<Value>,
    /// A provider claim's provider.
    pub provider: Option<Arc<CompiledProvider>>,
    /// Whether approval lets the claim be provisioned (§6.1); always open for a resources
    /// claim.
    pub approval: ApprovalGate,
    /// The resources a handle for the claim holds, in index order (empty when invalid).
    pub resources: Vec<DesiredResource>,
    /// The provider of each of `resources`.
    pub resource_providers: Vec<Arc<CompiledProvider>>,
    /// Provider claims: `spec.provider` with the effective parameter values (Δ B20).
    pub effective_provider: Option<ProviderParameters>,
    /// Provider claims: `status.provider` as it should be (§6.1, §8 steps 5–6).
    pub status_provider: Option<ClaimStatusProvider>,
    /// `status.resources` as the providers define it; `None` leaves the entries alone.
    pub status_resources: Option<Vec<PlannedResource>>,
    /// What keeps the claim from binding or changing its handle, each naming its field;
    /// empty when the claim is valid.
    pub problems: Vec<String>,
}

impl ResolvedClaim {
    pub(crate) fn is_valid(&self) -> bool {
        self.problems.is_empty()
    }

    /// What the claim's status (`Valid` False, reason `Invalid`) and the admission check say
    /// about an invalid claim: every problem.
    pub(crate) fn problem_message(&self) -> String {
        self.problems.join("; ")
    }

    /// Every provider involved: the claim's own and those of its resources. Creation is
    /// disabled when any of them says so (§7.1 step 7, Δ§2.3).
    pub(crate) fn providers(&self) -> impl Iterator<Item = &Arc<CompiledProvider>> {
        self.provider.iter().chain(&self.resource_providers)
    }

    /// Whether a handle may be created for the claim: not when the claim or any of its
    /// providers sets `disableCreation` (Δ§2.3, B18).
    pub(crate) fn creation_allowed(&self) -> bool {
        !self.claim.spec.disable_creation.unwrap_or(false)
            && !self
                .providers()
                .any(|p| p.spec().disable_creation.unwrap_or(false))
    }

    /// The providers whose lifespans bound a handle created for the claim: a provider claim's
    /// own provider only (§10.5: linked providers' lifespans are ignored), else each
    /// resource's provider.
    pub(crate) fn lifespan_providers(&self) -> Vec<&CompiledProvider> {
        match &self.provider {
            Some(provider) => vec![provider.as_ref()],
            None => self.resource_providers.iter().map(AsRef::as_ref).collect(),
        }
    }

    /// The unbound handles among `handles` the claim may bind, best first (Δ§3.2
    /// "Binding"): each resource is compared under its provider's `matchIgnore`; with
    /// `pool_name` (the claim's [`requested_pool`] as it is now), only that pool's handles.
    pub(crate) fn bind_candidates<'h>(
        &self,
        pool_name: Option<&str>,
        handles: impl IntoIterator<Item = &'h ResourceHandle>,
        now: DateTime<Utc>,
    ) -> Result<Vec<BindCandidate<'h>>, MatchError> {
        let (wanted, ignores) = self.matching_input();
        matching::bind_candidates(&wanted, pool_name, handles, &ignores, now)
    }

    /// Why each of `handles` that is not a bind candidate is not one, by the rules
    /// of [`ResolvedClaim::bind_candidates`]; [`matching::explain_no_fit`] words it.
    pub(crate) fn rejections<'h>(
        &self,
        pool_name: Option<&str>,
        handles: impl IntoIterator<Item = &'h ResourceHandle>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(&'h ResourceHandle, matching::Rejection)>, MatchError> {
        let (wanted, ignores) = self.matching_input();
        matching::rejections(&wanted, pool_name, handles, &ignores, now)
    }

    /// The claim's resources and their providers' `matchIgnore`, as matching takes them.
    fn matching_input(
        &self,
    ) -> (
        Vec<matching::DesiredResource<'_>>,
        HashMap<String, MatchIgnore>,
    ) {
        let wanted = self
            .resources
            .iter()
            .map(|r| matching::DesiredResource {
                provider_name: &r.provider.name,
                name: Some(r.name.as_str()).filter(|n| !n.is_empty()),
                template: Some(&r.template),
            })
            .collect();
        let ignores = self
            .resource_providers
            .iter()
            .map(|p| (p.name().to_owned(), p.match_ignore().clone()))
            .collect();
        (wanted, ignores)
    }

    /// The patch that binds the unbound `handle` to the claim, with the handle's lifespan
    /// evaluated for the claim (Δ§3.2, §10.3).
    pub(crate) fn bind_plan(
        &self,
        handle: &ResourceHandle,
        templates: &TemplateEngine,
        domain: &OperatorDomain,
        now: DateTime<Utc>,
    ) -> Result<BindPlan, ResolveError> {
        let subjects = Subjects::new(Some(&self.claim), Some(handle), domain);
        let limits = handle_lifespan(handle, &subjects, templates, now)?.limits();
        let mut plan = bind_patch(
            handle,
            &self.claim,
            &self.resources,
            self.effective_provider.as_ref(),
            &limits,
            domain,
            now,
        )?;
        // §7 step 11 in the bind's own write: the claim's edits reach the handle with the bind,
        // so that a bind costs one handle write and one handle reconcile, not two of each racing
        // each other. The propagation is computed on the handle as the bind leaves
        // it, exactly as it would be once the bind is read back.
        let Some(bound) = after_patch(handle, &plan.patch) else {
            return Ok(plan);
        };
        let propagation = self.propagation(&self.claim, &bound, templates, domain, now)?;
        plan.patch
            .0
            .extend(guard_templates(handle, propagation.patch.0));
        plan.rewrite_requested_end = propagation
            .rewrite_requested_end
            .or(plan.rewrite_requested_end);
        Ok(plan)
    }

    /// The handle created for the claim (§7.2), without its name: its lifespan is bounded by
    /// each of [`lifespan_providers`](Self::lifespan_providers), evaluated for the claim
    /// (§10.5). Whether creation is allowed at all is [`creation_allowed`](Self::creation_allowed).
    pub(crate) fn new_handle(
        &self,
        templates: &TemplateEngine,
        domain: &OperatorDomain,
        operator_namespace: &str,
        now: DateTime<Utc>,
    ) -> Result<HandleForClaim, ResolveError> {
        let subjects = Subjects::new(Some(&self.claim), None, domain);
        let lifespans = self
            .lifespan_providers()
            .into_iter()
            .map(|p| provider_lifespan(p, &subjects, templates, now))
            .collect::<Result<Vec<_>, _>>()?;
        let input = ClaimHandleInput {
            claim: &self.claim,
            provider: self.effective_provider.clone(),
            resources: &self.resources,
            lifespans: &lifespans,
        };
        Ok(handle_for_claim(&input, domain, operator_namespace, now)?)
    }

    /// What the claim's bound `handle` receives from `claim` (§7 step 11), with the handle's
    /// lifespan evaluated for the claim. `claim` is the claim as it is now (the controller
    /// reads it fresh after its own writes); the rest comes from this resolution.
    pub(crate) fn propagation(
        &self,
        claim: &ResourceClaim,
        handle: &ResourceHandle,
        templates: &TemplateEngine,
        domain: &OperatorDomain,
        now: DateTime<Utc>,
    ) -> Result<Propagation, ResolveError> {
        let subjects = Subjects::new(Some(claim), Some(handle), domain);
        let limits = handle_lifespan(handle, &subjects, templates, now)?.limits();
        let claim_providers: Vec<_> = self.resources.iter().map(|r| r.provider.clone()).collect();
        Ok(propagate_claim_to_handle(
            claim,
            self.shape,
            handle,
            self.effective_provider.as_ref(),
            &claim_providers,
            &limits,
            now,
        )?)
    }
}

/// `handle` with the changes of `patch` applied; `None` when they do not apply (the API server
/// then refuses the same patch). Its `test`s are the API server's to check: it treats a missing
/// field as null, which `json_patch` does not.
fn after_patch(handle: &ResourceHandle, patch: &json_patch::Patch) -> Option<ResourceHandle> {
    let changes: Vec<_> = patch
        .0
        .iter()
        .filter(|op| !matches!(op, json_patch::PatchOperation::Test(_)))
        .cloned()
        .collect();
    let mut document = serde_json::to_value(handle).ok()?;
    json_patch::patch(&mut document, &changes).ok()?;
    serde_json::from_value(document).ok()
}

/// `ops` (a propagation to the bound `handle`), each replacement of a template the handle
/// already holds preceded by a `test` that it still holds it: the replacement merges the claim
/// into that template, so a stale copy of the handle must fail the bind, not undo a change.
fn guard_templates(
    handle: &ResourceHandle,
    ops: Vec<json_patch::PatchOperation>,
) -> Vec<json_patch::PatchOperation> {
    let existing = handle.spec.resources.as_deref().unwrap_or(&[]);
    let mut guarded = Vec::with_capacity(ops.len());
    for op in ops {
        if let json_patch::PatchOperation::Add(add) = &op {
            let tokens: Vec<String> = add
                .path
                .tokens()
                .map(|t| t.decoded().into_owned())
                .collect();
            let index = match tokens.as_slice() {
                [spec, resources, index, template]
                    if spec == "spec" && resources == "resources" && template == "template" =>
                {
                    index.parse::<usize>().ok()
                }
                _ => None,
            };
            if let Some(current) = index
                .and_then(|i| existing.get(i))
                .and_then(|r| r.template.clone())
            {
                guarded.push(json_patch::PatchOperation::Test(
                    json_patch::TestOperation {
                        path: add.path.clone(),
                        value: current,
                    },
                ));
            }
        }
        guarded.push(op);
    }
    guarded
}

/// Resolves, initialises and validates `input.claim` (§6, §7 steps 3–7, §8).
///
/// Differences from Poolboy, on purpose: `status.provider.name` is recorded only once the
/// provider is found (so that a claim naming a missing provider can still be corrected), and
/// a resources claim's templates are validated after the defaults of initialisation, in the
/// same pass.
pub(crate) fn resolve_claim(input: &ResolveInput<'_>) -> Result<ResolvedClaim, ResolveError> {
    let shape = providers::claim_shape(input.claim)?;
    match shape {
        ClaimShape::Provider => resolve_provider_claim(input),
        ClaimShape::Resources => resolve_resources_claim(input),
    }
}

fn resolve_provider_claim(input: &ResolveInput<'_>) -> Result<ResolvedClaim, ResolveError> {
    let provider = providers::claim_provider(input.claim, input.catalog)?.clone();
    let mut claim = input.claim.clone();
    // §7 steps 3–4: a claim that waits for approval stops before its initialisation, which
    // comes once it is approved.
    let approval = approval_gate(provider.spec().approval.as_ref(), claim.status.as_ref());
    let initialisation = match &approval {
        ApprovalGate::Open => initialisation(&mut claim, input.domain, input.now, None),
        ApprovalGate::SetPending { .. } | ApprovalGate::Closed { .. } => None,
    };

    let subjects = Subjects::new(Some(&claim), input.handle, input.domain);
    let scope = validation_scope(&subjects, &provider, input);
    let requested = claim
        .spec
        .provider
        .as_ref()
        .and_then(|p| p.parameter_values.as_ref());
    let recorded = claim.status.as_ref().and_then(|s| s.provider.as_ref());
    let validated = recorded.and_then(|p| p.parameter_values.as_ref());
    let validation = validate_parameters(&provider, requested, validated, &scope, input.templates);

    if !validation.is_valid() {
        // §8 step 5: the errors are recorded; the last validated values stay.
        let status_provider = ClaimStatusProvider {
            name: provider.name().to_owned(),
            parameter_values: validated.cloned(),
            validation_errors: Some(validation.errors.clone()),
        };
        return Ok(ResolvedClaim {
            shape: ClaimShape::Provider,
            claim,
            initialisation,
            provider: Some(provider),
            approval,
            resources: Vec::new(),
            resource_providers: Vec::new(),
            effective_provider: None,
            status_provider: Some(status_provider),
            status_resources: None,
            problems: validation
                .errors
                .iter()
                .map(|e| format!("spec.provider.parameterValues: {e}"))
                .collect(),
        });
    }

    let status_provider = ClaimStatusProvider {
        name: provider.name().to_owned(),
        parameter_values: Some(validation.values.clone()),
        validation_errors: None,
    };
    // Templates see `resource_claim.parameter_values` as validated now (§9).
    claim
        .status
        .get_or_insert_with(ResourceClaimStatus::default)
        .provider = Some(status_provider.clone());
    let subjects = Subjects::new(Some(&claim), input.handle, input.domain);
    let generation = Generation {
        catalog: input.catalog,
        templates: input.templates,
        domain: input.domain,
        subjects: &subjects,
        now: input.now,
    };
    let resources = generation.resources(&provider, Some(&validation.values))?;
    let resource_providers = resources
        .iter()
        .map(|r| input.catalog.get(&r.provider.name).cloned())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ResolveError::Resources(e.into()))?;
    let status_resources = resources
        .iter()
        .map(|r| PlannedResource {
            name: Some(r.name.clone()).filter(|n| !n.is_empty()),
            provider: provider_ref(&r.provider),
            validation_error: None,
        })
        .collect();
    Ok(ResolvedClaim {
        shape: ClaimShape::Provider,
        claim,
        initialisation,
        effective_provider: Some(ProviderParameters {
            name: provider.name().to_owned(),
            parameter_values: Some(validation.values),
        }),
        provider: Some(provider),
        approval,
        resources,
        resource_providers,
        status_provider: Some(status_provider),
        status_resources: Some(status_resources),
        problems: Vec::new(),
    })
}

fn resolve_resources_claim(input: &ResolveInput<'_>) -> Result<ResolvedClaim, ResolveError> {
    let providers: Vec<Arc<CompiledProvider>> =
        providers::assign_providers(input.claim, input.catalog)?
            .into_iter()
            .cloned()
            .collect();
    let mut claim = input.claim.clone();
    let initialised = is_initialised(&claim, input.domain);

    // §6.3: defaults are applied once, at initialisation, and written into the claim.
    let templates: Vec<Value> = if initialised {
        let entries = claim.spec.resources.as_deref().unwrap_or(&[]);
        entries
            .iter()
            .map(|r| r.template.clone().unwrap_or_else(|| json!({})))
            .collect()
    } else {
        let subjects = Subjects::new(Some(&claim), None, input.domain);
        let scope = RenderContext::new(input.now, &Map::new())
            .with_variable("resource_claim", &subjects.claim);
        let mut defaulted = Vec::with_capacity(providers.len());
        for (index, provider) in providers.iter().enumerate() {
            defaulted.push(providers::template_with_defaults(
                &claim,
                index,
                provider,
                &scope,
                input.templates,
            )?);
        }
        defaulted
    };
    let initialisation = initialisation(
        &mut claim,
        input.domain,
        input.now,
        Some((&providers, &templates)),
    );

    let subjects = Subjects::new(Some(&claim), input.handle, input.domain);
    let entries = claim.spec.resources.as_deref().unwrap_or(&[]);
    let mut problems = Vec::new();
    let mut status_resources = Vec::with_capacity(providers.len());
    let mut resources = Vec::with_capacity(providers.len());
    for (index, ((provider, template), entry)) in
        providers.iter().zip(&templates).zip(entries).enumerate()
    {
        let scope = validation_scope(&subjects, provider, input);
        let validation_error =
            providers::validate_template(provider, template, &scope, input.templates).err();
        if let Some(error) = &validation_error {
            problems.push(format!("spec.resources[{index}]: {error}"));
        }
        let reference = provider.reference(input.domain);
        status_resources.push(PlannedResource {
            name: entry.name.clone(),
            provider: provider_ref(&reference),
            validation_error,
        });
        resources.push(DesiredResource {
            name: entry.name.clone().unwrap_or_default(),
            provider: reference,
            template: template.clone(),
        });
    }
    Ok(ResolvedClaim {
        shape: ClaimShape::Resources,
        claim,
        initialisation,
        provider: None,
        approval: ApprovalGate::Open,
        resources: if problems.is_empty() {
            resources
        } else {
            Vec::new()
        },
        resource_providers: providers,
        effective_provider: None,
        status_provider: None,
        status_resources: Some(status_resources),
        problems,
    })
}

/// The pool a claim asks to be bound from: its `D/resource-pool-name` annotation (Δ§3.2).
pub(crate) fn requested_pool<'c>(
    metadata: &'c ObjectMeta,
    domain: &OperatorDomain,
) -> Option<&'c str> {
    metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&domain.resource_pool_name()))
        .map(String::as_str)
}

/// Whether the claim carries `D/resource-claim-init-timestamp` (§6.3).
pub(crate) fn is_initialised(claim: &ResourceClaim, domain: &OperatorDomain) -> bool {
    claim
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(&domain.resource_claim_init_timestamp()))
}

/// §6.3: when the claim is not initialised, applies the initialisation to `claim` and returns
/// the one merge patch that writes it: the annotation, and for resources claims every entry
/// with its full provider reference and its defaulted template (when not empty).
fn initialisation(
    claim: &mut ResourceClaim,
    domain: &OperatorDomain,
    now: DateTime<Utc>,
    resources: Option<(&[Arc<CompiledProvider>], &[Value])>,
) -> Option<Value> {
    if is_initialised(claim, domain) {
        return None;
    }
    let key = domain.resource_claim_init_timestamp();
    let stamp = format_timestamp(now);
    claim
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(key.clone(), stamp.clone());
    let mut patch = json!({ "metadata": { "annotations": { key: stamp } } });
    if let Some((providers, templates)) = resources
        && let Some(entries) = claim.spec.resources.as_mut()
    {
        for ((entry, provider), template) in entries.iter_mut().zip(providers).zip(templates) {
            entry.provider = Some(provider_ref(&provider.reference(domain)));
            if template.as_object().is_some_and(|t| !t.is_empty()) {
                entry.template = Some(template.clone());
            }
        }
        patch["spec"] = json!({ "resources": entries });
    }
    Some(patch)
}

/// `resource_claim`, `resource_handle`, `resource_provider` and the provider's and handle's
/// vars: the scope of validation checks and parameter templates (§5.7, Δ§3.4).
fn validation_scope(
    subjects: &Subjects,
    provider: &CompiledProvider,
    input: &ResolveInput<'_>,
) -> RenderContext {
    RenderContext::new(input.now, &Map::new())
        .with_variable("resource_claim", &subjects.claim)
        .with_variable("resource_handle", &subjects.handle)
        .with_variable("resource_provider", provider.view())
        .with_template_variables(provider.spec().vars.as_ref())
        .with_template_variables(subjects.handle_vars.as_ref())
}

/// A full provider reference in the form claims write it.
pub(crate) fn provider_ref(reference: &crate::api::refs::ObjectRef) -> ProviderRef {
    ProviderRef {
        api_version: Some(reference.api_version.clone()),
        kind: Some(reference.kind.clone()),
        name: reference.name.clone(),
        namespace: Some(reference.namespace.clone()),
    }
}

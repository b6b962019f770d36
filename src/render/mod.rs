//! `poolboy render`: the broker's decisions for a claim or a pool without a cluster. Every step
//! calls the function the controllers call, so what this prints is what the broker would do
//! at `now`, for the first reconcile (no managed resource exists yet).

pub(crate) mod input;

use chrono::{DateTime, Utc};

use serde_json::Value;

use crate::api::refs::WaitingFor;
use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle};
use crate::core::binding::matching::explain_no_fit;
use crate::core::claim::resolve::{
    ResolveError, ResolveInput, ResolvedClaim, requested_pool, resolve_claim,
};
use crate::core::handle::new::handle_for_pool;
use crate::core::handle::plan::{
    HandlePlanError, HandleProviders, PlanEnvironment, PlanInput, ResourcePlan,
    generated_resources, plan_resources_timed,
};
use crate::core::lifespan::api_time;
use crate::core::pool::refresh::{pool_version, provider_specs, stamp};
use crate::core::provider::schema::SchemaCache;
use crate::core::provider::{ProviderCatalog, ProviderCompiler, ProviderProblem};
use crate::core::template::{ClockReading, TemplateEngine};
use crate::render::input::RenderInput;

/// How to render.
pub(crate) struct RenderOptions {
    pub domain: OperatorDomain,
    pub operator_namespace: String,
    /// The name the created handle gets (the API server would generate `guid-xxxxx`).
    pub handle_name: String,
    pub now: DateTime<Utc>,
}

/// What the broker would do.
#[derive(Debug)]
pub(crate) struct Rendered {
    /// The handle created (or, when a pooled handle fits the claim, that handle once bound).
    pub handle: ResourceHandle,
    /// What happened, in words ("binds to a handle of pool …").
    pub notes: Vec<String>,
    /// Each resource of the handle, in index order.
    pub resources: Vec<RenderedResource>,
}

#[derive(Debug)]
pub(crate) struct RenderedResource {
    pub index: usize,
    /// The entry's name, or its provider's.
    pub name: String,
    pub outcome: RenderedOutcome,
    /// When this resource's rendering would change with the clock alone.
    pub next_change: NextChange,
}

#[derive(Debug)]
pub(crate) enum RenderedOutcome {
    /// The definition the broker would create.
    Definition(Value),
    /// Not created yet, and why.
    Waiting(String),
}

/// When the clock alone would change a resource's rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NextChange {
    /// Its templates do not read the clock, or nothing they compare with it is still to come.
    Never,
    /// A comparison with the current time flips at this instant.
    At(DateTime<Utc>),
    /// A result uses the current time in a way no instant can be derived from (it prints it):
    /// the broker renders it again every `--time-template-interval`.
    Unpredictable,
}

impl From<ClockReading> for NextChange {
    fn from(reading: ClockReading) -> Self {
        match reading {
            ClockReading {
                next_flip: Some(at),
                ..
            } => NextChange::At(at),
            ClockReading {
                unpredictable: true,
                ..
            } => NextChange::Unpredictable,
            ClockReading { .. } => NextChange::Never,
        }
    }
}

/// Why nothing can be rendered: each message as the broker would report it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RenderError {
    #[error("invalid ResourceProviders:\n{}", format_problems(.0))]
    Providers(Vec<(String, ProviderProblem)>),
    #[error("the ResourceClaim is invalid:\n{}", bullet(.0))]
    Claim(Vec<String>),
    #[error("{0}")]
    Failed(String),
}

fn format_problems(problems: &[(String, ProviderProblem)]) -> String {
    let lines: Vec<String> = problems
        .iter()
        .map(|(provider, problem)| format!("ResourceProvider {provider}: {problem}"))
        .collect();
    bullet(&lines)
}

fn bullet(lines: &[String]) -> String {
    lines
        .iter()
        .map(|l| format!("  - {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn failed(e: impl std::fmt::Display) -> RenderError {
    RenderError::Failed(e.to_string())
}

/// Renders `input`: checks every provider first (all problems at once), then the claim, then
/// produces the handle and its resources.
pub(crate) fn render(input: RenderInput, options: &RenderOptions) -> Result<Rendered, RenderError> {
    let templates = TemplateEngine::new();
    let schemas = SchemaCache::default();
    let compiler = ProviderCompiler {
        domain: &options.domain,
        templates: &templates,
        schemas: &schemas,
    };
    let providers = input.providers.into_iter().map(|mut p| {
        p.metadata
            .namespace
            .get_or_insert_with(|| options.operator_namespace.clone());
        p
    });
    let catalog = ProviderCatalog::build(providers, &compiler);
    let problems: Vec<(String, ProviderProblem)> = catalog
        .problems()
        .flat_map(|(name, problems)| problems.iter().map(|p| (name.to_owned(), p.clone())))
        .collect();
    if !problems.is_empty() {
        return Err(RenderError::Providers(problems));
    }
    let renderer = Renderer {
        catalog: &catalog,
        compiler: &compiler,
        templates: &templates,
        options,
    };

    let pool_handle = match &input.pool {
        Some(pool) => {
            let mut pool = pool.clone();
            pool.metadata
                .namespace
                .get_or_insert_with(|| options.operator_namespace.clone());
            let provider = match &pool.spec.provider {
                Some(p) => Some(catalog.get(&p.name).map_err(failed)?),
                None => None,
            };
            let lifespan = provider.and_then(|p| p.spec().lifespan.as_ref());
            let mut handle = handle_for_pool(&pool, lifespan, None, &options.domain, options.now)
                .map_err(failed)?;
            let version =
                pool_version(&handle, &provider_specs(&catalog, &handle), &options.domain);
            stamp(&mut handle, &version, &options.domain);
            renderer.name(&mut handle);
            let refused = renderer.generate_resources(&mut handle, None)?;
            Some((handle, refused))
        }
        None => None,
    };

    let Some(claim) = input.claim else {
        let (handle, refused) = pool_handle.ok_or_else(|| failed("nothing to render"))?;
        let mut notes = vec!["a pool handle, unclaimed".to_owned()];
        notes.extend(refused);
        return renderer.finish(handle, None, notes);
    };
    // Binding regenerates the pool handle's resources: its refusals are noted then.
    renderer.claim(claim, pool_handle.map(|(handle, _)| handle))
}

struct Renderer<'a> {
    catalog: &'a ProviderCatalog,
    compiler: &'a ProviderCompiler<'a>,
    templates: &'a TemplateEngine,
    options: &'a RenderOptions,
}

impl Renderer<'_> {
    fn now(&self) -> DateTime<Utc> {
        self.options.now
    }

    fn domain(&self) -> &OperatorDomain {
        &self.options.domain
    }

    /// What the API server would fill in on create.
    fn name(&self, handle: &mut ResourceHandle) {
        handle.metadata.name = Some(self.options.handle_name.clone());
        handle.metadata.uid = Some("00000000-0000-0000-0000-000000000000".to_owned());
        handle.metadata.creation_timestamp = Some(api_time(self.now()));
    }

    fn claim(
        &self,
        mut claim: ResourceClaim,
        pool_handle: Option<ResourceHandle>,
    ) -> Result<Rendered, RenderError> {
        claim
            .metadata
            .namespace
            .get_or_insert_with(|| "default".to_owned());
        claim
            .metadata
            .uid
            .get_or_insert_with(|| "00000000-0000-0000-0000-000000000001".to_owned());
        claim
            .metadata
            .creation_timestamp
            .get_or_insert_with(|| api_time(self.now()));
        let resolved = self.resolve(&claim)?;
        if let Some(pool_handle) = pool_handle {
            let pool_name = requested_pool(&resolved.claim.metadata, self.domain());
            let candidates = resolved
                .bind_candidates(pool_name, [&pool_handle], self.now())
                .map_err(failed)?;
            if !candidates.is_empty() {
                return self.bind(&resolved, pool_handle);
            }
            let rejections = resolved
                .rejections(pool_name, [&pool_handle], self.now())
                .map_err(failed)?;
            let mut notes = vec![format!(
                "{}: a new handle is created",
                explain_no_fit(&rejections)
            )];
            let (handle, more) = self.new_claim_handle(&resolved)?;
            notes.extend(more);
            return self.finish(handle, Some(&resolved.claim), notes);
        }
        let (handle, notes) = self.new_claim_handle(&resolved)?;
        self.finish(handle, Some(&resolved.claim), notes)
    }

    fn new_claim_handle(
        &self,
        resolved: &ResolvedClaim,
    ) -> Result<(ResourceHandle, Vec<String>), RenderError> {
        if !resolved.creation_allowed() {
            return Err(failed(
                "handle creation is disabled for this claim (disableCreation) and no pooled handle fits",
            ));
        }
        let created = resolved
            .new_handle(
                self.templates,
                self.domain(),
                &self.options.operator_namespace,
                self.now(),
            )
            .map_err(failed)?;
        let mut handle = created.handle;
        self.name(&mut handle);
        let mut notes = vec!["a new handle is created for the claim".to_owned()];
        if let Some(end) = created.rewrite_requested_end {
            notes.push(format!(
                "the claim's spec.lifespan.end is clamped to {}",
                crate::core::lifespan::format_timestamp(end)
            ));
        }
        Ok((handle, notes))
    }

    fn bind(
        &self,
        resolved: &ResolvedClaim,
        handle: ResourceHandle,
    ) -> Result<Rendered, RenderError> {
        let claim = &resolved.claim;
        let plan = resolved
            .bind_plan(&handle, self.templates, self.domain(), self.now())
            .map_err(failed)?;
        let handle = apply(&handle, &plan.patch)?;
        let propagation = resolved
            .propagation(claim, &handle, self.templates, self.domain(), self.now())
            .map_err(failed)?;
        let mut handle = apply(&handle, &propagation.patch)?;
        let refused = self.generate_resources(&mut handle, Some(claim))?;
        let pool = handle
            .spec
            .resource_pool
            .as_ref()
            .map(|p| p.name.clone())
            .unwrap_or_default();
        let mut notes = vec![format!(
            "the claim binds to an unbound handle of pool {pool}"
        )];
        notes.extend(refused);
        self.finish(handle, Some(claim), notes)
    }

    /// Resolves, initialises and validates the claim as the claim controller does (§6, §7
    /// step 6, §8); an invalid claim is an error listing every problem.
    fn resolve(&self, claim: &ResourceClaim) -> Result<ResolvedClaim, RenderError> {
        let input = ResolveInput {
            claim,
            handle: None,
            catalog: self.catalog,
            templates: self.templates,
            domain: self.domain(),
            now: self.now(),
        };
        let resolved = resolve_claim(&input).map_err(|e| match e {
            ResolveError::Claim(e) => RenderError::Claim(vec![e.to_string()]),
            ResolveError::Resources(e) => failed(e),
            other => failed(other),
        })?;
        if !resolved.is_valid() {
            // A provider claim's parameter errors are listed as its status records them.
            let errors = resolved
                .status_provider
                .and_then(|p| p.validation_errors)
                .unwrap_or(resolved.problems);
            return Err(RenderError::Claim(errors));
        }
        Ok(resolved)
    }

    /// A handle with `spec.provider` regenerates its resources as the handle controller does
    /// (§9, Δ§3.2 step 4). Returns the entries left alone because their provider would change,
    /// in the words the handle's status would report them.
    fn generate_resources(
        &self,
        handle: &mut ResourceHandle,
        claim: Option<&ResourceClaim>,
    ) -> Result<Vec<String>, RenderError> {
        let generated =
            generated_resources(&self.environment(), handle, claim).map_err(|e| match e {
                HandlePlanError::Provider(e) => failed(e),
                HandlePlanError::Generation(e) => failed(e),
            })?;
        let Some(generated) = generated else {
            return Ok(Vec::new());
        };
        *handle = apply(handle, &generated.patch)?;
        Ok(generated.refused)
    }

    fn environment(&self) -> PlanEnvironment<'_> {
        PlanEnvironment {
            catalog: self.catalog,
            templates: self.templates,
            domain: self.domain(),
            now: self.now(),
            render_at: self.now(),
        }
    }

    /// Renders each resource of the handle, as the first handle reconcile would (§12.4):
    /// no resource exists yet. A resource whose definition cannot be produced fails the render.
    fn finish(
        &self,
        handle: ResourceHandle,
        claim: Option<&ResourceClaim>,
        notes: Vec<String>,
    ) -> Result<Rendered, RenderError> {
        let providers = HandleProviders::resolve(&handle, self.catalog, self.compiler);
        let entries = handle.spec.resources.as_deref().unwrap_or(&[]);
        let states = vec![None; entries.len()];
        let input = PlanInput {
            handle: &handle,
            claim,
            providers: &providers,
            states: &states,
            requester: None,
        };
        let plans = plan_resources_timed(&self.environment(), &input);
        let mut resources = Vec::with_capacity(plans.len());
        for (index, (entry, (plan, clock))) in entries.iter().zip(plans).enumerate() {
            let name = entry
                .name
                .clone()
                .unwrap_or_else(|| entry.provider.name.clone());
            let outcome = match plan {
                ResourcePlan::Apply { definition, .. } => RenderedOutcome::Definition(definition),
                ResourcePlan::WaitingForClaim => {
                    RenderedOutcome::Waiting(waiting(WaitingFor::ResourceClaim))
                }
                ResourcePlan::WaitingForLink { linked_provider } => {
                    RenderedOutcome::Waiting(format!(
                        "{} ({linked_provider} has no state yet)",
                        waiting(WaitingFor::LinkedResourceProvider)
                    ))
                }
                ResourcePlan::Invalid(message) => return Err(RenderError::Failed(message)),
            };
            resources.push(RenderedResource {
                index,
                name,
                outcome,
                next_change: clock.into(),
            });
        }
        Ok(Rendered {
            handle,
            notes,
            resources,
        })
    }
}

fn waiting(reason: WaitingFor) -> String {
    match serde_json::to_value(reason) {
        Ok(Value::String(s)) => format!("waiting for {s}"),
        _ => "waiting".to_owned(),
    }
}

/// Applies a patch to a handle, as the API server would. The server's JSON patch takes
/// `test <path> == null` as passing when the path is absent (the bind guard relies on it);
/// the json-patch crate does not, so such tests are checked here.
fn apply(
    handle: &ResourceHandle,
    patch: &json_patch::Patch,
) -> Result<ResourceHandle, RenderError> {
    let mut document = serde_json::to_value(handle).map_err(failed)?;
    let mut ops = Vec::new();
    for op in &patch.0 {
        match op {
            json_patch::PatchOperation::Test(test) if test.value.is_null() => {
                let found = test.path.resolve(&document).ok().filter(|v| !v.is_null());
                if found.is_some() {
                    return Err(failed(format!("test failed: {} is not null", test.path)));
                }
            }
            other => ops.push(other.clone()),
        }
    }
    json_patch::patch(&mut document, &ops).map_err(failed)?;
    serde_json::from_value(document).map_err(failed)
}

#[cfg(test)]
mod tests;

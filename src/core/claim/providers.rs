//! What a claim asks for, resolved against the providers: provider assignment (§6.1–§6.2),
//! defaults at initialisation (§6.3) and validation of resources-claim templates (§7 step 6).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::ResourceClaim;
use crate::core::json::merge::{MergeMode, deep_merge};
use crate::core::provider::schema::defaults_from_schema;
use crate::core::provider::{CompiledProvider, ProviderCatalog, ProviderError};
use crate::core::template::RenderContext;
use crate::core::template::{TemplateEngine, TemplateError};

/// Why a claim cannot be resolved. Each is reported in the claim's status; none is retried
/// until the claim or a provider changes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum AssignmentError {
    #[error("ResourceClaim has both spec.provider and spec.resources")]
    BothProviderAndResources,
    #[error("ResourceClaim has neither spec.provider nor spec.resources")]
    NeitherProviderNorResources,
    #[error(
        "spec.provider value ({requested}) does not match status.provider value ({recorded}): spec.provider is immutable"
    )]
    ProviderImmutable { requested: String, recorded: String },
    #[error(
        "ResourceClaim spec.resources[{0}] requires either an explicit provider or a resource template to match"
    )]
    NoProviderOrTemplate(usize),
    #[error("spec.resources[{index}]: {source}")]
    Provider {
        index: usize,
        #[source]
        source: ProviderError,
    },
    #[error(transparent)]
    ClaimProvider(ProviderError),
    #[error(
        "spec.resources[{index}]: default template of ResourceProvider {provider} failed: {source}"
    )]
    Defaults {
        index: usize,
        provider: String,
        #[source]
        source: Box<TemplateError>,
    },
}

/// The two shapes of claim (§3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaimShape {
    /// `spec.provider`: one provider generates the resources from parameters.
    Provider,
    /// `spec.resources`: explicit partial definitions, each with its provider.
    Resources,
}

/// Which shape the claim has (§6.1: both or neither is an error).
pub(crate) fn claim_shape(claim: &ResourceClaim) -> Result<ClaimShape, AssignmentError> {
    match (&claim.spec.provider, &claim.spec.resources) {
        (Some(_), Some(_)) => Err(AssignmentError::BothProviderAndResources),
        (Some(_), None) => Ok(ClaimShape::Provider),
        (None, Some(resources)) if !resources.is_empty() => Ok(ClaimShape::Resources),
        _ => Err(AssignmentError::NeitherProviderNorResources),
    }
}

/// The provider of a provider claim; `spec.provider.name` may not change once recorded in
/// `status.provider.name` (§6.1).
pub(crate) fn claim_provider<'a>(
    claim: &ResourceClaim,
    catalog: &'a ProviderCatalog,
) -> Result<&'a Arc<CompiledProvider>, AssignmentError> {
    let requested = claim
        .spec
        .provider
        .as_ref()
        .map(|p| p.name.as_str())
        .ok_or(AssignmentError::NeitherProviderNorResources)?;
    let recorded = claim
        .status
        .as_ref()
        .and_then(|s| s.provider.as_ref())
        .map(|p| p.name.as_str());
    if let Some(recorded) = recorded
        && recorded != requested
    {
        return Err(AssignmentError::ProviderImmutable {
            requested: requested.to_owned(),
            recorded: recorded.to_owned(),
        });
    }
    catalog
        .get(requested)
        .map_err(AssignmentError::ClaimProvider)
}

/// The provider of each `spec.resources` entry: its explicit `provider.name`, else the one
/// provider whose `match` fits its template (§6.2).
pub(crate) fn assign_providers<'a>(
    claim: &ResourceClaim,
    catalog: &'a ProviderCatalog,
) -> Result<Vec<&'a Arc<CompiledProvider>>, AssignmentError> {
    let resources = claim.spec.resources.as_deref().unwrap_or(&[]);
    resources
        .iter()
        .enumerate()
        .map(|(index, resource)| {
            let found = match (&resource.provider, &resource.template) {
                (Some(provider), _) => catalog.get(&provider.name),
                (None, Some(template)) => catalog.find_by_match(template),
                (None, None) => return Err(AssignmentError::NoProviderOrTemplate(index)),
            };
            found.map_err(|source| AssignmentError::Provider { index, source })
        })
        .collect()
}

/// The template of `spec.resources[index]` with the provider's defaults filled in, without
/// overwriting anything the user wrote (§6.3): first `spec.default` (rendered when templates
/// are enabled), then the defaults of `spec.validation.openAPIV3Schema`.
///
/// `scope` carries `resource_claim`; `resource_index`, `resource_name` and
/// `resource_provider` are added here, and the provider's vars (Δ§3.4: provider vars only).
pub(crate) fn template_with_defaults(
    claim: &ResourceClaim,
    index: usize,
    provider: &CompiledProvider,
    scope: &RenderContext,
    templates: &TemplateEngine,
) -> Result<Value, AssignmentError> {
    let resource = claim.spec.resources.as_deref().and_then(|r| r.get(index));
    let mut template = resource
        .and_then(|r| r.template.clone())
        .unwrap_or_else(|| json!({}));
    let spec = provider.spec();
    if let Some(default) = &spec.default {
        if spec.template_enabled() {
            let scope = scope
                .clone()
                .with_variable("resource_index", json!(index))
                .with_variable(
                    "resource_name",
                    json!(resource.and_then(|r| r.name.clone())),
                )
                .with_variable("resource_provider", provider.view())
                .with_template_variables(spec.vars.as_ref());
            // Rendered apart: see below.
            let apart = templates.watching();
            let rendered =
                apart
                    .render(default, &scope)
                    .map_err(|source| AssignmentError::Defaults {
                        index,
                        provider: provider.name().to_owned(),
                        source: Box::new(source),
                    })?;
            let before = template.clone();
            deep_merge(&mut template, &rendered, MergeMode::KeepExisting);
            // Defaults are written into the claim once (§6.3); a default printing
            // the current time makes the claim depend on the clock only while it fills a gap.
            if template != before {
                templates.absorb(&apart);
            }
        } else {
            deep_merge(&mut template, default, MergeMode::KeepExisting);
        }
    }
    let schema = spec
        .validation
        .as_ref()
        .and_then(|v| v.open_api_v3_schema.as_ref());
    if let Some(defaults) = schema.and_then(defaults_from_schema) {
        deep_merge(&mut template, &defaults, MergeMode::KeepExisting);
    }
    Ok(template)
}

/// Validates a resources-claim template (§7 step 6): the provider's schema, then each
/// `validation.checks` entry in order; the first failure is the message for
/// `status.resources[i].validationError`.
///
/// `scope` carries `resource_claim`, `resource_handle`, `resource_provider` and the vars;
/// the template's top-level keys are added as variables here.
pub(crate) fn validate_template(
    provider: &CompiledProvider,
    template: &Value,
    scope: &RenderContext,
    templates: &TemplateEngine,
) -> Result<(), String> {
    if let Some(schema) = provider.template_schema() {
        schema.validate(template).map_err(|v| v.to_string())?;
    }
    let checks = provider
        .spec()
        .validation
        .as_ref()
        .and_then(|v| v.checks.as_ref());
    let scope = match template {
        Value::Object(keys) => scope.clone().with_variables(keys),
        _ => scope.clone(),
    };
    for check in checks.into_iter().flatten() {
        match templates.check(&check.check, &scope) {
            Ok(true) => {}
            Ok(false) => return Err(format!("Validation check failed: {}", check.name)),
            Err(e) => {
                return Err(format!(
                    "Validation check \"{}\" failed with exception: {e}",
                    check.name
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

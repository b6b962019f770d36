//! Claim edits reaching the bound handle (§7 step 11): the provider (with effective values),
//! resources-claim templates merged over the handle's, extra resources, and the requested
//! lifespan end clamped to the maximums. Update filters do not apply here; they apply from
//! handle to resource (§12.2).

use chrono::{DateTime, Utc};
use json_patch::{Patch, PatchOperation, RemoveOperation};
use serde_json::{Value, json};

use crate::api::refs::ProviderParameters;
use crate::api::{ResourceClaim, ResourceHandle};
use crate::core::claim::providers::ClaimShape;
use crate::core::json::merge::{MergeMode, deep_merge};
use crate::core::json::patch::values_equal;
use crate::core::json::pointer::{add, pointer};
use crate::core::lifespan::{self, LifespanError, LifespanLimits, format_timestamp};

/// The handle patch (empty when nothing differs) and the claim's rewritten requested end.
#[derive(Debug, Clone, Default)]
pub(crate) struct Propagation {
    pub patch: Patch,
    pub rewrite_requested_end: Option<DateTime<Utc>>,
}

/// What the handle should receive from `claim`. `provider` is the claim's effective provider
/// (provider claims); `claim_providers` the provider reference of each claim resource
/// (resources claims); `limits` the handle's lifespan evaluated for the claim.
pub(crate) fn propagate_claim_to_handle(
    claim: &ResourceClaim,
    shape: ClaimShape,
    handle: &ResourceHandle,
    provider: Option<&ProviderParameters>,
    claim_providers: &[crate::api::refs::ObjectRef],
    limits: &LifespanLimits,
    now: DateTime<Utc>,
) -> Result<Propagation, LifespanError> {
    let mut ops = Vec::new();
    match shape {
        ClaimShape::Provider => {
            if let Some(provider) = provider
                && handle.spec.provider.as_ref() != Some(provider)
            {
                ops.push(add(&["spec", "provider"], json!(provider)));
            }
        }
        ClaimShape::Resources => {
            if handle.spec.provider.is_some() {
                ops.push(PatchOperation::Remove(RemoveOperation {
                    path: pointer(&["spec", "provider"]),
                }));
            }
            let handle_resources = handle.spec.resources.as_deref().unwrap_or(&[]);
            let claim_resources = claim.spec.resources.as_deref().unwrap_or(&[]);
            if handle.spec.resources.is_none() && !claim_resources.is_empty() {
                ops.push(add(&["spec", "resources"], json!([])));
            }
            for (index, resource) in claim_resources.iter().enumerate() {
                let index_text = index.to_string();
                let existing = handle_resources.get(index);
                if existing.is_none() {
                    let Some(provider) = claim_providers.get(index) else {
                        continue;
                    };
                    let mut entry = json!({ "provider": provider });
                    if let Some(name) = &resource.name {
                        entry["name"] = json!(name);
                    }
                    if let Some(template) = &resource.template {
                        entry["template"] = template.clone();
                    }
                    ops.push(add(&["spec", "resources", "-"], entry));
                    continue;
                }
                let Some(claim_template) = &resource.template else {
                    continue;
                };
                let current = existing
                    .and_then(|r| r.template.clone())
                    .unwrap_or_else(|| json!({}));
                let mut merged = current.clone();
                deep_merge(&mut merged, claim_template, MergeMode::Overwrite);
                if !values_equal(&merged, &current) {
                    ops.push(add(&["spec", "resources", &index_text, "template"], merged));
                }
            }
        }
    }

    let clamped = lifespan::clamp_requested_end(claim, limits, now)?;
    if let Some(clamped) = clamped {
        let end = format_timestamp(clamped.end);
        let current = handle.spec.lifespan.as_ref().and_then(|l| l.end.as_deref());
        match (&handle.spec.lifespan, current) {
            (None, _) => ops.push(add(&["spec", "lifespan"], json!({ "end": end }))),
            (Some(_), Some(current)) if same_instant(current, &end) => {}
            (Some(_), _) => ops.push(add(&["spec", "lifespan", "end"], Value::String(end))),
        }
    }
    Ok(Propagation {
        patch: Patch(ops),
        rewrite_requested_end: clamped.filter(|c| c.rewrite_request).map(|c| c.end),
    })
}

fn same_instant(a: &str, b: &str) -> bool {
    match (
        lifespan::parse_timestamp("end", a),
        lifespan::parse_timestamp("end", b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests;

//! Binding a claim to an existing unbound handle (Δ§3.2): one JSON patch whose first op is
//! `test /spec/resourceClaim == null`, so that of two binders racing for a handle, across
//! processes too, exactly one wins; the loser gets 422 and tries its next candidate (B01).

use chrono::{DateTime, Utc};
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, TestOperation};
use serde_json::{Value, json};

use super::desired_resources::DesiredResource;
use super::lifespan::{self, LifespanError, LifespanLimits, format_timestamp};
use super::new_handle::claim_reference;
use crate::api::refs::ProviderParameters;
use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle};

/// The bind patch, and what the claim's requested end becomes.
#[derive(Debug, Clone)]
pub struct BindPlan {
    pub patch: Patch,
    /// When set, write this clamped end to the claim's `spec.lifespan.end` (§10.4 fix).
    pub rewrite_requested_end: Option<DateTime<Utc>>,
}

/// The patch that binds `handle` to `claim` (Δ§3.2, in Poolboy's op order):
/// 1. `test /spec/resourceClaim == null` (B01);
/// 2. the claim labels, creating the labels map if needed (B02);
/// 3. `spec.resourceClaim`;
/// 4. for provider claims, `spec.provider` with the effective parameter values (B20);
/// 5. resource names that differ, and the claim's extra resources appended;
/// 6. the lifespan end for the claim (B03: the whole `lifespan` object when absent), or the
///    removal of a pool's unclaimed end when no rule gives the claim an end.
///
/// `limits` is the handle's lifespan evaluated for this claim.
pub fn bind_patch(
    handle: &ResourceHandle,
    claim: &ResourceClaim,
    claim_resources: &[DesiredResource],
    provider: Option<&ProviderParameters>,
    limits: &LifespanLimits,
    domain: &OperatorDomain,
    now: DateTime<Utc>,
) -> Result<BindPlan, LifespanError> {
    let mut ops = vec![PatchOperation::Test(TestOperation {
        path: pointer(&["spec", "resourceClaim"]),
        value: Value::Null,
    })];
    let reference = claim_reference(claim, domain);
    if handle.metadata.labels.is_none() {
        ops.push(add(&["metadata", "labels"], json!({})));
    }
    ops.push(add(
        &["metadata", "labels", &domain.resource_claim_name()],
        json!(reference.name),
    ));
    ops.push(add(
        &["metadata", "labels", &domain.resource_claim_namespace()],
        json!(reference.namespace),
    ));
    ops.push(add(&["spec", "resourceClaim"], json!(reference)));
    if let Some(provider) = provider {
        ops.push(add(&["spec", "provider"], json!(provider)));
    }

    let handle_resources = handle.spec.resources.as_deref().unwrap_or(&[]);
    for (index, resource) in claim_resources.iter().enumerate() {
        let index_text = index.to_string();
        match handle_resources.get(index) {
            Some(existing) => {
                let wanted = Some(resource.name.as_str()).filter(|n| !n.is_empty());
                if wanted.is_some() && existing.name.as_deref() != wanted {
                    ops.push(add(
                        &["spec", "resources", &index_text, "name"],
                        json!(resource.name),
                    ));
                }
            }
            None => {
                let mut entry = json!({ "provider": resource.provider });
                if !resource.name.is_empty() {
                    entry["name"] = json!(resource.name);
                }
                ops.push(add(&["spec", "resources", "-"], entry));
            }
        }
    }

    let end = lifespan::handle_end_for_claim(claim, limits, now)?;
    let has_lifespan = handle.spec.lifespan.is_some();
    let has_end = handle
        .spec
        .lifespan
        .as_ref()
        .is_some_and(|l| l.end.is_some());
    match end {
        Some(end) if has_lifespan => ops.push(add(
            &["spec", "lifespan", "end"],
            json!(format_timestamp(end.end)),
        )),
        Some(end) => ops.push(add(
            &["spec", "lifespan"],
            json!({ "end": format_timestamp(end.end) }),
        )),
        None if has_end => ops.push(PatchOperation::Remove(RemoveOperation {
            path: pointer(&["spec", "lifespan", "end"]),
        })),
        None => {}
    }
    Ok(BindPlan {
        patch: Patch(ops),
        rewrite_requested_end: end.filter(|e| e.rewrite_request).map(|e| e.end),
    })
}

/// A JSON pointer from unescaped segments.
pub(crate) fn pointer(segments: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(segments.iter().copied())
}

/// An `add` op at the pointer made of `segments`.
pub(crate) fn add(segments: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: pointer(segments),
        value,
    })
}

//! Binding a claim to an existing unbound handle (Δ§3.2): one JSON patch whose first op is
//! `test /spec/resourceClaim == null`, so that of two binders racing for a handle, across
//! processes too, exactly one wins; the loser gets 422 and tries its next candidate (B01).
//! And its undoing, when the claim's status records another handle.

use chrono::{DateTime, Utc};
use json_patch::{Patch, PatchOperation, RemoveOperation, TestOperation};
use serde_json::{Value, json};

use crate::api::refs::ProviderParameters;
use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle};
use crate::core::handle::desired::DesiredResource;
use crate::core::handle::new::claim_reference;
use crate::core::json::pointer::{add, pointer};
use crate::core::lifespan::{self, LifespanError, LifespanLimits, format_timestamp};

/// The bind patch, and what the claim's requested end becomes.
#[derive(Debug, Clone)]
pub(crate) struct BindPlan {
    pub patch: Patch,
    /// When set, write this clamped end to the claim's `spec.lifespan.end` (§10.4 fix).
    pub rewrite_requested_end: Option<DateTime<Utc>>,
}

/// The patch that binds `handle` to `claim` (Δ§3.2, in Poolboy's op order):
/// 1. `test /spec/resourceClaim == null` (B01), and `test /metadata/deletionTimestamp == null`
///    (not in Poolboy: a handle being deleted must not be bound);
/// 2. the claim labels, creating the labels map if needed (B02);
/// 3. `spec.resourceClaim`;
/// 4. for provider claims, `spec.provider` with the effective parameter values (B20);
/// 5. resource names that differ, and the claim's extra resources appended;
/// 6. the lifespan end for the claim (B03: the whole `lifespan` object when absent), or the
///    removal of a pool's unclaimed end when no rule gives the claim an end.
///
/// `limits` is the handle's lifespan evaluated for this claim.
pub(crate) fn bind_patch(
    handle: &ResourceHandle,
    claim: &ResourceClaim,
    claim_resources: &[DesiredResource],
    provider: Option<&ProviderParameters>,
    limits: &LifespanLimits,
    domain: &OperatorDomain,
    now: DateTime<Utc>,
) -> Result<BindPlan, LifespanError> {
    // A handle being deleted is not bound either: a stale copy may not show its deletion, and
    // its finalizer would take the claim down with it.
    let mut ops = vec![
        PatchOperation::Test(TestOperation {
            path: pointer(&["spec", "resourceClaim"]),
            value: Value::Null,
        }),
        PatchOperation::Test(TestOperation {
            path: pointer(&["metadata", "deletionTimestamp"]),
            value: Value::Null,
        }),
    ];
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
    // A pool handle with `spec.provider` has no resources before its first reconcile; appending
    // to a missing list would fail the whole patch and look like a lost race.
    if handle.spec.resources.is_none() && !claim_resources.is_empty() {
        ops.push(add(&["spec", "resources"], json!([])));
    }
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

/// The patch with which a claim lets go of a handle it does not record (a bind that lost to
/// another process, or a stray): `test` that the handle is still bound to `claim`
/// (once let go, it is not this claim's to touch), remove `spec.resourceClaim` and the claim
/// labels the handle has, and mark it [`OperatorDomain::released_from_claim`] with the
/// claim's `namespace/name`, so that nobody binds it again and it is deleted
/// ([`crate::core::binding::matching::is_released`]). A copy without annotations adds the
/// whole map behind a `test` that the live handle has none: adding it blindly would drop
/// annotations the copy does not show.
pub(crate) fn unbind_patch(
    handle: &ResourceHandle,
    claim: &ResourceClaim,
    domain: &OperatorDomain,
) -> Patch {
    let mut ops = vec![
        PatchOperation::Test(TestOperation {
            path: pointer(&["spec", "resourceClaim"]),
            value: json!(claim_reference(claim, domain)),
        }),
        PatchOperation::Remove(RemoveOperation {
            path: pointer(&["spec", "resourceClaim"]),
        }),
    ];
    let labels = handle.metadata.labels.as_ref();
    for label in [
        domain.resource_claim_name(),
        domain.resource_claim_namespace(),
    ] {
        if labels.is_some_and(|l| l.contains_key(&label)) {
            ops.push(PatchOperation::Remove(RemoveOperation {
                path: pointer(&["metadata", "labels", &label]),
            }));
        }
    }
    let key = domain.released_from_claim();
    let released_from = format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    );
    if handle.metadata.annotations.is_some() {
        ops.push(add(
            &["metadata", "annotations", &key],
            json!(released_from),
        ));
    } else {
        ops.push(PatchOperation::Test(TestOperation {
            path: pointer(&["metadata", "annotations"]),
            value: Value::Null,
        }));
        ops.push(add(
            &["metadata", "annotations"],
            json!({ key: released_from }),
        ));
    }
    Patch(ops)
}

#[cfg(test)]
mod tests;

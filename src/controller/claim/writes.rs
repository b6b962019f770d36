//! Every write the claim controller makes to a claim. Each is guarded by the claim's
//! resourceVersion (a JSON-patch `test`, or `metadata.resourceVersion` in a merge patch), so a
//! write based on a stale read fails with [`Written::Conflict`] and the caller recomputes from
//! a fresh read (B06) instead of undoing someone's change.

use chrono::{DateTime, Utc};
use json_patch::{Patch as JsonPatch, PatchOperation, TestOperation};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::{Value, json};

use super::super::context::Context;
use super::super::kinds::{ClaimObject, Kinds};
use super::ClaimError;
use crate::core::binding::bind::{add, pointer};
use crate::core::claim::status::{StatusInput, desired_claim_status, status_patch};
use crate::core::lifespan::{format_timestamp, parse_timestamp};

/// The outcome of a guarded write.
pub(crate) enum Written<T> {
    Done(T),
    /// The object changed since it was read: recompute from a fresh read.
    Conflict,
    /// The object is gone.
    Gone,
}

fn api(ctx: &Context, claim: &ClaimObject) -> Api<ClaimObject> {
    ctx.claims_api(claim.metadata.namespace.as_deref().unwrap_or_default())
}

fn name(claim: &ClaimObject) -> &str {
    claim.metadata.name.as_deref().unwrap_or_default()
}

fn version(claim: &ClaimObject) -> &str {
    claim
        .metadata
        .resource_version
        .as_deref()
        .unwrap_or_default()
}

/// `test /metadata/resourceVersion == <the version read>`.
fn version_test(claim: &ClaimObject) -> PatchOperation {
    PatchOperation::Test(TestOperation {
        path: pointer(&["metadata", "resourceVersion"]),
        value: json!(version(claim)),
    })
}

/// Whether an API error means "changed since read": 409, or the 422 of a JSON patch that
/// no longer applies (a failed `test`, a path gone), which the API server reports without
/// field causes. A 422 with causes is an invalid write, reported as an error.
pub(crate) fn is_conflict(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            let no_causes = status.details.as_ref().is_none_or(|d| d.causes.is_empty());
            status.code == 409 || (status.code == 422 && no_causes)
        }
        _ => false,
    }
}

pub(crate) fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Sorts the result of a write into done, conflict and gone.
fn sort<T>(result: Result<T, kube::Error>) -> Result<Written<T>, ClaimError> {
    match result {
        Ok(value) => Ok(Written::Done(value)),
        Err(e) if is_conflict(&e) => Ok(Written::Conflict),
        Err(e) if is_not_found(&e) => Ok(Written::Gone),
        Err(e) => Err(e.into()),
    }
}

/// The claim as the API server has it now; `None` when it is gone.
pub(crate) async fn refetch(
    ctx: &Context,
    claim: &ClaimObject,
) -> Result<Option<ClaimObject>, ClaimError> {
    Ok(api(ctx, claim).get_opt(name(claim)).await?)
}

/// Adds the operator's finalizer when missing (Δ§4.7: exactly one Poolboy finalizer).
pub(crate) async fn ensure_finalizer(
    ctx: &Context,
    claim: ClaimObject,
) -> Result<Written<ClaimObject>, ClaimError> {
    let finalizer = ctx.domain().finalizer();
    let finalizers = claim.metadata.finalizers.as_deref();
    if finalizers.is_some_and(|f| f.contains(&finalizer)) {
        return Ok(Written::Done(claim));
    }
    let mut ops = vec![version_test(&claim)];
    match finalizers {
        Some(_) => ops.push(add(&["metadata", "finalizers", "-"], json!(finalizer))),
        None => ops.push(add(&["metadata", "finalizers"], json!([finalizer]))),
    }
    let patch = Patch::Json::<()>(JsonPatch(ops));
    sort(
        api(ctx, &claim)
            .patch(name(&claim), &PatchParams::default(), &patch)
            .await,
    )
}

/// Removes every Poolboy finalizer (Δ§4.7), keeping the others.
pub(crate) async fn remove_finalizers(
    ctx: &Context,
    claim: &ClaimObject,
) -> Result<Written<ClaimObject>, ClaimError> {
    let domain = ctx.domain();
    let current = claim.metadata.finalizers.clone().unwrap_or_default();
    let kept: Vec<String> = current
        .iter()
        .filter(|f| !domain.is_poolboy_finalizer(f))
        .cloned()
        .collect();
    if kept.len() == current.len() {
        return Ok(Written::Done(claim.clone()));
    }
    let ops = vec![
        version_test(claim),
        add(&["metadata", "finalizers"], json!(kept)),
    ];
    let patch = Patch::Json::<()>(JsonPatch(ops));
    sort(
        api(ctx, claim)
            .patch(name(claim), &PatchParams::default(), &patch)
            .await,
    )
}

/// Writes the initialisation merge patch (§6.3), guarded by the version read.
pub(crate) async fn initialise(
    ctx: &Context,
    claim: &ClaimObject,
    patch: &Value,
) -> Result<Written<ClaimObject>, ClaimError> {
    let mut patch = patch.clone();
    patch["metadata"]["resourceVersion"] = json!(version(claim));
    sort(
        api(ctx, claim)
            .patch(name(claim), &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    )
}

/// Sets the claim's requested end, `spec.lifespan.end` (the first-ready reset of §7.4, or a
/// request clamped to relativeMaximum, §10.4); nothing when it already says so.
pub(crate) async fn requested_end(
    ctx: &Context,
    claim: ClaimObject,
    end: DateTime<Utc>,
) -> Result<Written<ClaimObject>, ClaimError> {
    let current = claim.spec.lifespan.as_ref().and_then(|l| l.end.as_deref());
    if current.is_some_and(|c| parse_timestamp("end", c).is_ok_and(|c| c == end)) {
        return Ok(Written::Done(claim));
    }
    let patch = json!({
        "metadata": { "resourceVersion": version(&claim) },
        "spec": { "lifespan": { "end": format_timestamp(end) } },
    });
    sort(
        api(ctx, &claim)
            .patch(name(&claim), &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    )
}

/// Writes the status `input` describes, when it differs from the claim's.
pub(crate) async fn status(
    ctx: &Context,
    claim: ClaimObject,
    input: &StatusInput<'_>,
) -> Result<Written<ClaimObject>, ClaimError> {
    let current = claim.status.as_ref();
    let desired = desired_claim_status(current, input);
    let Some(patch) = status_patch(current, &desired, version(&claim)) else {
        return Ok(Written::Done(claim));
    };
    let patch = Patch::Json::<()>(patch);
    sort(
        api(ctx, &claim)
            .patch_status(name(&claim), &PatchParams::default(), &patch)
            .await,
    )
}

/// §6.1: `status.approval = {state: pending, message}`, guarded by the version read.
pub(crate) async fn approval_pending(
    ctx: &Context,
    claim: &ClaimObject,
    message: &str,
) -> Result<Written<ClaimObject>, ClaimError> {
    let patch = json!({
        "metadata": { "resourceVersion": version(claim) },
        "status": { "approval": { "state": "pending", "message": message } },
    });
    sort(
        api(ctx, claim)
            .patch_status(name(claim), &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    )
}

/// §7 step 10: `status.resourceHandle.detached = true`, guarded by the version read.
pub(crate) async fn detach(
    ctx: &Context,
    claim: &ClaimObject,
) -> Result<Written<ClaimObject>, ClaimError> {
    let patch = json!({
        "metadata": { "resourceVersion": version(claim) },
        "status": { "resourceHandle": { "detached": true } },
    });
    sort(
        api(ctx, claim)
            .patch_status(name(claim), &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    )
}

/// Deletes the claim (its handle is gone, §7 step 5, or it expired detached, §7.5); the
/// uid precondition spares a claim recreated under the same name.
pub(crate) async fn delete(ctx: &Context, claim: &ClaimObject) -> Result<(), ClaimError> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: claim.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api(ctx, claim).delete(name(claim), &params).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) || is_conflict(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The claim's namespace and name, as the claim index keys waiting claims.
pub(crate) fn key(claim: &ClaimObject) -> (&str, &str) {
    (
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        name(claim),
    )
}

/// The same claim as `core` sees it.
pub(crate) fn view(claim: &ClaimObject) -> crate::api::ResourceClaim {
    Kinds::claim_of(claim)
}

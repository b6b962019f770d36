//! Every write the claim controller makes to a claim, through the guarded-write layer
//! (`controller::write`): each is guarded by the claim's resourceVersion, so a write based on a
//! stale read ends as [`Written::Conflict`] and the caller recomputes from a fresh read (B06)
//! instead of undoing someone's change.

use chrono::{DateTime, Utc};
use kube::api::{Api, Patch};
use serde_json::{Value, json};

use super::super::context::Context;
use super::super::oversized;
use super::super::write::{self, Target, Written};
use super::ClaimError;
use crate::api::kinds::ClaimObject;
use crate::core::claim::status::{StatusInput, desired_claim_status, status_patch};
use crate::core::lifespan::{format_timestamp, parse_timestamp};

fn api(ctx: &Context, claim: &ClaimObject) -> Api<ClaimObject> {
    ctx.claims_api(claim.metadata.namespace.as_deref().unwrap_or_default())
}

fn version(claim: &ClaimObject) -> &str {
    claim
        .metadata
        .resource_version
        .as_deref()
        .unwrap_or_default()
}

/// Adds the operator's finalizer to a claim without a Poolboy finalizer (Δ§4.7: exactly one).
pub(crate) async fn ensure_finalizer(
    ctx: &Context,
    claim: ClaimObject,
) -> Result<Written<ClaimObject>, ClaimError> {
    let api = api(ctx, &claim);
    Ok(write::ensure_poolboy_finalizer(&api, claim, ctx.domain()).await?)
}

/// Removes every Poolboy finalizer (Δ§4.7), keeping the others.
pub(crate) async fn remove_finalizers(
    ctx: &Context,
    claim: &ClaimObject,
) -> Result<Written<ClaimObject>, ClaimError> {
    let domain = ctx.domain();
    let ours = |f: &str| domain.is_poolboy_finalizer(f);
    Ok(write::release_finalizers(&api(ctx, claim), claim, ours).await?)
}

/// The initialisation merge patch `initialisation` (nothing when `None`) that also adds
/// `finalizer` to those `claim` has: a merge patch replaces the whole list, which the version
/// guard of [`initialise`] makes safe.
pub(crate) fn with_finalizer(
    initialisation: Option<Value>,
    claim: &ClaimObject,
    finalizer: &str,
) -> Value {
    let mut patch = initialisation.unwrap_or_else(|| json!({}));
    let mut finalizers = claim.metadata.finalizers.clone().unwrap_or_default();
    finalizers.push(finalizer.to_owned());
    patch["metadata"]["finalizers"] = json!(finalizers);
    patch
}

/// Writes the initialisation merge patch (§6.3), guarded by the version read. The pass goes
/// on with what it resolved: the initialised claim resolves to the same.
pub(crate) async fn initialise(
    ctx: &Context,
    claim: &ClaimObject,
    patch: &Value,
) -> Result<Written<ClaimObject>, ClaimError> {
    Ok(write::merge_continued(&api(ctx, claim), claim, patch).await?)
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
    let patch = json!({ "spec": { "lifespan": { "end": format_timestamp(end) } } });
    Ok(write::merge(&api(ctx, &claim), &claim, Target::Object, &patch).await?)
}

/// Writes the status `input` describes, when it differs from the claim's (core's patch
/// carries the resourceVersion `test`).
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
    let api = api(ctx, &claim);
    match write::send_from(&api, &claim, Target::Status, &patch).await {
        Err(error) if oversized::is_too_large(&error) => {
            let conditions = claim.status.as_ref().and_then(|s| s.conditions.as_deref());
            oversized::report(ctx, &api, &claim, &ctx.kinds.claim, conditions, &error).await;
            Err(ClaimError::StatusTooLarge(error))
        }
        written => Ok(written?),
    }
}

/// §7 step 10: `status.resourceHandle.detached = true`, guarded by the version read.
pub(crate) async fn detach(
    ctx: &Context,
    claim: &ClaimObject,
) -> Result<Written<ClaimObject>, ClaimError> {
    let patch = json!({ "status": { "resourceHandle": { "detached": true } } });
    Ok(write::merge(&api(ctx, claim), claim, Target::Status, &patch).await?)
}

/// Deletes the claim (its handle is gone, §7 step 5, or it expired detached, §7.5); the
/// uid precondition spares a claim recreated under the same name.
pub(crate) async fn delete(ctx: &Context, claim: &ClaimObject) -> Result<(), ClaimError> {
    // Gone already, or a namesake: either way this claim is no more.
    write::delete_exact(&api(ctx, claim), claim).await?;
    Ok(())
}

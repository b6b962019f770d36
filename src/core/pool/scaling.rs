//! ResourcePoolScaling (Δ§2.1): when a scaling is active, the state it shows, when it wakes
//! up, which one a pool consumes, and the guarded patches that move its `status.count`.
//!
//! `status.count` is the number of handles the scaling has created, net of its unhealthy
//! handles the pool deleted. A scaling is active while `spec.count` exceeds it, from `at` on;
//! the pool creates handles for it (labelled with its name) and raises the count; deleting an
//! unhealthy labelled handle lowers it again, which re-activates the scaling (Δ§3.3 step 2).

use chrono::{DateTime, Utc};
use json_patch::{Patch, PatchOperation, TestOperation};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::api::scaling::ScalingState;
use crate::api::{OperatorDomain, ResourcePool, ResourcePoolScaling};
use crate::core::conditions::{Change, set_configuration_validity};
use crate::core::json::pointer::{add, pointer};

/// A scaling that cannot be acted on as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ScalingError {
    #[error(
        "spec.at: {value:?} is not an RFC 3339 date-time such as 2026-05-01T08:00:00Z ({reason})"
    )]
    BadAt { value: String, reason: String },
}

/// The scaling's conditions with `Valid` set for its `problem` (a missing pool, a bad `at`;
/// absent until there is one), and what changed: written only when something did.
pub(crate) fn validity_conditions(
    scaling: &ResourcePoolScaling,
    problem: Option<&str>,
    now: DateTime<Utc>,
) -> (Vec<Condition>, Change) {
    let mut conditions = scaling
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let generation = scaling.metadata.generation;
    let change = set_configuration_validity(&mut conditions, problem, generation, now);
    (conditions, change)
}

/// When the scaling starts: `spec.at`, or `None` (now) when absent. Any RFC 3339 date-time is
/// accepted, fractional seconds included (Poolboy's `strptime` rejects those; the CRD's
/// `format: date-time` admits them).
pub(crate) fn start(scaling: &ResourcePoolScaling) -> Result<Option<DateTime<Utc>>, ScalingError> {
    scaling
        .spec
        .at
        .as_deref()
        .map(|at| {
            DateTime::parse_from_rfc3339(at)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| ScalingError::BadAt {
                    value: at.to_owned(),
                    reason: e.to_string(),
                })
        })
        .transpose()
}

/// `status.count`: the handles created so far (0 when absent; never below 0).
pub(crate) fn created(scaling: &ResourcePoolScaling) -> i64 {
    scaling
        .status
        .as_ref()
        .and_then(|s| s.count)
        .unwrap_or(0)
        .max(0)
}

/// How many more handles the scaling wants: `spec.count − status.count`, at least 0.
pub(crate) fn remaining(scaling: &ResourcePoolScaling) -> u64 {
    u64::try_from(scaling.spec.count.saturating_sub(created(scaling))).unwrap_or(0)
}

/// Whether the pool should create handles for the scaling now (Δ§2.1 "Active"): `at` has
/// come (absent = now), `spec.count > status.count`, and the scaling is not ignored.
pub(crate) fn is_active(
    scaling: &ResourcePoolScaling,
    domain: &OperatorDomain,
    now: DateTime<Utc>,
) -> Result<bool, ScalingError> {
    let started = start(scaling)?.is_none_or(|at| at <= now);
    Ok(started && remaining(scaling) > 0 && !domain.ignores(&scaling.metadata))
}

/// The state a scaling whose count is `count` shows: `waiting` before `at`, `scaling` while
/// `count < spec.count`, `done` once reached. Poolboy inverts the second comparison (Q7); this
/// is the evident intent.
pub(crate) fn state_for(
    scaling: &ResourcePoolScaling,
    count: i64,
    now: DateTime<Utc>,
) -> Result<ScalingState, ScalingError> {
    Ok(match start(scaling)? {
        Some(at) if now < at => ScalingState::Waiting,
        _ if count < scaling.spec.count => ScalingState::Scaling,
        _ => ScalingState::Done,
    })
}

/// The state the scaling should show now, for its current count.
pub(crate) fn desired_state(
    scaling: &ResourcePoolScaling,
    now: DateTime<Utc>,
) -> Result<ScalingState, ScalingError> {
    state_for(scaling, created(scaling), now)
}

/// When the scaling should be looked at again: at `at` while it is still ahead.
pub(crate) fn next_deadline(
    scaling: &ResourcePoolScaling,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, ScalingError> {
    Ok(start(scaling)?.filter(|at| *at > now))
}

/// Whether `scaling` is for `pool`: `spec.resourcePool.name` names it, in its namespace.
pub(crate) fn is_scaling_of_pool(scaling: &ResourcePoolScaling, pool: &ResourcePool) -> bool {
    scaling.spec.resource_pool.name == pool.name_any() && scaling.namespace() == pool.namespace()
}

/// The active scalings of `pool`, in the order the pool consumes them: oldest first, then by
/// name. The pool consumes the first (one per pass, Δ§3.3 step 4); Poolboy takes the first in
/// list order, which is not stable across processes, so this one is made deterministic. A
/// scaling whose `at` does not parse is never active.
pub(crate) fn active_scalings_of_pool<'a>(
    scalings: impl IntoIterator<Item = &'a ResourcePoolScaling>,
    pool: &ResourcePool,
    domain: &OperatorDomain,
    now: DateTime<Utc>,
) -> Vec<&'a ResourcePoolScaling> {
    let mut active: Vec<&ResourcePoolScaling> = scalings
        .into_iter()
        .filter(|s| is_scaling_of_pool(s, pool) && is_active(s, domain, now) == Ok(true))
        .collect();
    active.sort_by(|a, b| {
        let created = |s: &ResourcePoolScaling| s.metadata.creation_timestamp.clone();
        created(a)
            .cmp(&created(b))
            .then_with(|| a.name_any().cmp(&b.name_any()))
    });
    active
}

/// How many of `create` new handles belong to a scaling that still wants `remaining`: the
/// first `min(create, remaining)`. Every handle created for the scaling also fills the
/// minAvailable deficit (Δ§3.3 step 5), but handles beyond its demand are the pool's own:
/// Poolboy labels and counts them for the scaling too, pushing `status.count` past
/// `spec.count`; here the count never passes `spec.count` through creation.
pub(crate) fn attributed(create: usize, remaining: u64) -> usize {
    usize::try_from(remaining).map_or(create, |r| create.min(r))
}

/// The count after the pool deleted `deleted` of the scaling's handles: never below 0 (B16).
pub(crate) fn decremented(count: i64, deleted: i64) -> i64 {
    count.saturating_sub(deleted).max(0)
}

/// The JSON patch (for the status subresource) that sets `status.count` to `count`, and
/// `status.state` to match, only if the count is still the one `scaling` shows (Δ B16): `test
/// /status/count <old>`, or `test /status null` while there is no status. A 422 (or 409)
/// answer means another writer moved the count; read the scaling again and recompute. The
/// state is left alone when `at` does not parse (the scaling controller reports that).
pub(crate) fn count_patch(scaling: &ResourcePoolScaling, count: i64, now: DateTime<Utc>) -> Patch {
    let state = state_for(scaling, count, now).ok();
    let ops = match &scaling.status {
        None => {
            let mut status = json!({"count": count});
            if let Some(state) = state {
                status["state"] = json!(state);
            }
            vec![test(&["status"], Value::Null), add(&["status"], status)]
        }
        Some(current) => {
            let mut ops = vec![
                test(&["status", "count"], json!(current.count)),
                add(&["status", "count"], json!(count)),
            ];
            if let Some(state) = state {
                ops.push(add(&["status", "state"], json!(state)));
            }
            ops
        }
    };
    Patch(ops)
}

/// The JSON patch (for the status subresource) that sets `status.state` to `state`, guarded
/// like [`count_patch`] so that a state computed from a stale count never overwrites a newer
/// one. Writing the state into a missing status works (Q7: Poolboy's patch fails there).
pub(crate) fn state_patch(scaling: &ResourcePoolScaling, state: ScalingState) -> Patch {
    let ops = match &scaling.status {
        None => vec![
            test(&["status"], Value::Null),
            add(&["status"], json!({"state": state})),
        ],
        Some(status) => vec![
            test(&["status", "count"], json!(status.count)),
            add(&["status", "state"], json!(state)),
        ],
    };
    Patch(ops)
}

/// The owner references the scaling should have: the pool as its controller (with the pool's
/// uid, so that deleting the pool garbage-collects the scaling, Δ§2.1 step 2), plus any
/// reference to something else that is not a controller. `None` when they are already so.
pub(crate) fn owner_references(
    current: &[OwnerReference],
    pool: &ResourcePool,
    pool_api_version: &str,
) -> Option<Vec<OwnerReference>> {
    let uid = pool.metadata.uid.clone().unwrap_or_default();
    let wanted = OwnerReference {
        api_version: pool_api_version.to_owned(),
        kind: "ResourcePool".to_owned(),
        name: pool.name_any(),
        uid,
        controller: Some(true),
        block_owner_deletion: None,
    };
    let is_pool_or_controller =
        |r: &OwnerReference| r.kind == "ResourcePool" || r.controller == Some(true);
    let mut references: Vec<OwnerReference> = current
        .iter()
        .filter(|r| !is_pool_or_controller(r))
        .cloned()
        .collect();
    let present = current.iter().filter(|r| is_pool_or_controller(r)).count() == 1
        && current.iter().any(|r| {
            r.api_version == wanted.api_version
                && r.kind == wanted.kind
                && r.name == wanted.name
                && r.uid == wanted.uid
                && r.controller == Some(true)
        });
    if present {
        return None;
    }
    references.insert(0, wanted);
    Some(references)
}

fn test(segments: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Test(TestOperation {
        path: pointer(segments),
        value,
    })
}

#[cfg(test)]
mod tests;

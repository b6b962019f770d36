//! The pool's side of its scalings (Δ§3.3 step 4, Δ B16): which active scaling a pass
//! consumes, and the guarded raising and lowering of a scaling's count around the handles made
//! for it.

use chrono::{DateTime, Utc};
use kube::ResourceExt;
use kube::api::Patch;

use super::{Observed, PoolContext, PoolError};
use crate::api::kinds::Kinds;
use crate::api::{ResourcePool, ResourcePoolScaling};
use crate::controller::context::Context;
use crate::controller::write::{self, Halt, Target, Written};
use crate::core::pool::scaling::{
    active_scalings_of_pool, attributed, count_patch, created, decremented, is_active,
    is_scaling_of_pool, remaining,
};

/// A scaling's count is lowered from a fresh read this many times before giving up (Δ B16).
const SCALING_COUNT_ATTEMPTS: usize = 12;

/// The first new handles are the scaling's: its count is raised before they are created,
/// guarded, so that no other pass (here or in another process) creates them again. The
/// scaling and how many of `new_names` are its; a conflict when another writer moved the
/// count (these names will then not be created).
pub(super) async fn reserve_for_scaling<'a>(
    pctx: &PoolContext,
    pool: &ResourcePool,
    seen: &'a Observed,
    new_names: &[String],
    now: DateTime<Utc>,
) -> Result<Option<(&'a ResourcePoolScaling, usize)>, Halt<PoolError>> {
    let for_scaling = match &seen.scaling {
        Some(scaling) if !new_names.is_empty() => {
            let count = attributed(new_names.len(), remaining(scaling));
            (count > 0).then_some((scaling, count))
        }
        _ => None,
    };
    if let Some((scaling, count)) = for_scaling
        && !reserve_scaling_handles(&pctx.ctx, scaling, count, now).await?
    {
        pctx.with_pending(pool, |memory| {
            for new in new_names {
                memory.settle(new, now);
            }
        });
        return Err(Halt::Conflict);
    }
    Ok(for_scaling)
}

/// The scaling this pass consumes (Δ§3.3 step 4): the first of the pool's active scalings,
/// per the store, that a fresh read confirms active. The store can lag behind the count this
/// process just wrote; the fresh read keeps a scaling from being filled twice. A scaling the
/// store shows done while it is active again comes with a watch event that wakes the pool.
pub(super) async fn consumed_scaling(
    ctx: &Context,
    pool: &ResourcePool,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<ResourcePoolScaling>, PoolError> {
    let cached: Vec<ResourcePoolScaling> = ctx
        .stores
        .scalings
        .store()
        .state()
        .iter()
        .map(|s| Kinds::scaling_of(s))
        .collect();
    let api = ctx.scalings_api();
    for candidate in active_scalings_of_pool(&cached, pool, ctx.domain(), now) {
        if let Some(fresh) = api.get_opt(&candidate.name_any()).await? {
            let fresh = Kinds::scaling_of(&fresh);
            if is_scaling_of_pool(&fresh, pool) && is_active(&fresh, ctx.domain(), now) == Ok(true)
            {
                return Ok(Some(fresh));
            }
        }
    }
    Ok(None)
}

/// Raises `scaling`'s count by `count` if it is still what this pass read (Δ B16 `test`);
/// `false` when another writer moved it (or the scaling is gone): the pass is recomputed.
async fn reserve_scaling_handles(
    ctx: &Context,
    scaling: &ResourcePoolScaling,
    count: usize,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<bool, PoolError> {
    let raised = created(scaling).saturating_add(i64::try_from(count).unwrap_or(i64::MAX));
    let patch = Patch::Json::<()>(count_patch(scaling, raised, now));
    let api = ctx.scalings_api();
    let written = write::send(&api, &scaling.name_any(), Target::Status, &patch).await?;
    Ok(matches!(written, Written::Done(_)))
}

/// Lowers the count of scaling `name` by `count`, not below 0, from a fresh read each time
/// another writer got in first (Δ B16: up to 12 attempts); a scaling that is gone is ignored.
/// The lower count re-activates the scaling, whose watch event wakes the pool for the
/// replacement.
pub(super) async fn release_scaling_handles(
    ctx: &Context,
    name: &str,
    count: i64,
) -> Result<(), PoolError> {
    let api = ctx.scalings_api();
    for _ in 0..SCALING_COUNT_ATTEMPTS {
        let Some(object) = api.get_opt(name).await? else {
            return Ok(());
        };
        let scaling = Kinds::scaling_of(&object);
        let lowered = decremented(created(&scaling), count);
        if lowered == created(&scaling) {
            return Ok(());
        }
        let patch = Patch::Json::<()>(count_patch(&scaling, lowered, ctx.now()));
        match write::send(&api, name, Target::Status, &patch).await? {
            Written::Done(_) => {
                tracing::info!(scaling = %name, count = lowered, "lowered ResourcePoolScaling count");
                return Ok(());
            }
            Written::Gone => return Ok(()),
            Written::Conflict => {}
        }
    }
    Err(PoolError::ScalingContended(name.to_owned()))
}

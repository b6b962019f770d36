//! What a waiting claim's estimate (`core::claim::estimate`) is read from: its pool, the
//! pool's provisioning times and free handles, as the pool index keeps them.

use chrono::{DateTime, Utc};

use super::ClaimContext;
use crate::api::claim::ClaimWaitEstimate;
use crate::api::kinds::Kinds;
use crate::api::{ResourceHandle, ResourcePool};
use crate::core::claim::estimate::{self, FreeHandle, PoolWait};
use crate::core::claim::status::Unbound;

/// A claim waiting for a handle of a pool: in its line, or for one to be freed. `None` for
/// any other wait, or a pool none of whose handles got ready yet.
pub(super) fn of_unbound(
    ctx: &ClaimContext,
    unbound: &Unbound,
    now: DateTime<Utc>,
) -> Option<(ClaimWaitEstimate, String)> {
    let (name, position) = match unbound {
        Unbound::InLine { pool, ahead, .. } => (pool, Some(ahead + 1)),
        Unbound::WaitingForPool { pool, .. } => (pool, None),
        _ => return None,
    };
    let pool = pool_named(ctx, name)?;
    let (handle_ready, _) = ctx.stores.pool_handles.provisioning_time(&pool)?;
    let index = &ctx.stores.pool_handles;
    let unbound = index.unbound(&pool, &index.unclaimed(&pool), ctx.domain());
    let free: Vec<FreeHandle> = unbound.iter().filter_map(|h| FreeHandle::of(h)).collect();
    let wait = PoolWait {
        pool: name,
        handle_ready,
        position,
        free: &free,
    };
    Some(estimate::waiting(&wait, now))
}

/// A bound claim whose pool handle did not get ready yet.
pub(super) fn of_bound(
    ctx: &ClaimContext,
    handle: &ResourceHandle,
    now: DateTime<Utc>,
) -> Option<(ClaimWaitEstimate, String)> {
    let reference = handle.spec.resource_pool.as_ref()?;
    let handle = FreeHandle::of(handle).filter(|h| !h.ready)?;
    let pool = pool_named(ctx, &reference.name)?;
    let (handle_ready, _) = ctx.stores.pool_handles.provisioning_time(&pool)?;
    let name = &reference.name;
    Some(estimate::provisioning(
        name,
        handle_ready,
        handle.created,
        now,
    ))
}

/// The pool called `name`, as the pool store has it.
fn pool_named(ctx: &ClaimContext, name: &str) -> Option<ResourcePool> {
    ctx.stored_pool(name).map(|pool| Kinds::pool_of(&pool))
}

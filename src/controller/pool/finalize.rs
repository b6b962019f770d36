//! A pool's deletion (§11 step 9, Δ§3.3): its unbound handles go, its bound ones stay.

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;

use super::{PoolContext, PoolError};
use crate::api::kinds::{HandleObject, Kinds, PoolObject};
use crate::api::{OperatorDomain, ResourcePool};
use crate::controller::write::{self, Halt, OrHalt, Written};
use crate::core::pool::plan::is_unbound_handle_of_pool;

/// Pool deletion (§11 step 9, Δ§3.3): deletes every unbound handle of the pool (bound ones
/// stay, with their pool reference and labels), then removes every Poolboy finalizer.
pub(super) async fn finalize(
    pool_object: &PoolObject,
    pctx: &PoolContext,
) -> Result<Action, Halt<PoolError>> {
    let ctx = &pctx.ctx;
    let pool = Kinds::pool_of(pool_object);
    let name = pool.name_any();
    let handles_api = ctx.handles_api();
    for handle in &pctx.handles().unclaimed(&pool) {
        if is_unbound_handle_of_pool(&**handle, &pool, ctx.domain())
            && delete_unbound(&handles_api, handle, &pool, ctx.domain()).await?
        {
            ctx.metrics.handle_deleted("pool_deleted");
        }
    }
    // Handles created but not shown by the store yet: look them up.
    let pending = pctx.with_pending(&pool, |memory| memory.names());
    for pending_name in pending {
        if pctx.handles().shows(&pool, &pending_name) {
            continue;
        }
        if let Some(handle) = handles_api.get_opt(&pending_name).await?
            && delete_unbound(&handles_api, &handle, &pool, ctx.domain()).await?
        {
            ctx.metrics.handle_deleted("pool_deleted");
        }
    }
    tracing::info!(pool = %name, "deleted the unbound ResourceHandles of a deleted pool");

    let domain = ctx.domain();
    let ours = |f: &str| domain.is_poolboy_finalizer(f);
    write::release_finalizers(&ctx.pools_api(), pool_object, ours)
        .await
        .or_halt()?;
    // Deleted now: its delete event finds it gone, and what this process remembers of it
    // goes then (`Lifecycle::gone`), as it does when another process ran this.
    Ok(Action::await_change())
}

/// Deletes `handle` if it is still an unbound handle of `pool`; `true` when this call
/// deleted it. A handle bound in the meantime is never deleted (`write::delete_while`); one
/// that keeps changing halts the pass, recomputed from a fresh read.
pub(super) async fn delete_unbound(
    api: &Api<HandleObject>,
    handle: &HandleObject,
    pool: &ResourcePool,
    domain: &OperatorDomain,
) -> Result<bool, Halt<PoolError>> {
    let still_spare = |h: &HandleObject| is_unbound_handle_of_pool(h, pool, domain);
    match write::delete_while(api, handle, 2, still_spare).await? {
        Written::Done(()) => Ok(true),
        Written::Gone => Ok(false),
        Written::Conflict => Err(Halt::Conflict),
    }
}

//! The ResourcePool controller (§11, Δ§3.3).

use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::context::Context;
use super::kinds::{HandleObject, Kinds, PoolObject};
use crate::runtime::run::Shutdown;

#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// The controller, watching pools of the operator namespace, and handles: a handle change wakes its pool, so a bind refills at once. Its store is the index of pools
/// every controller reads (`Context::stores`).
pub fn controller(
    client: &Client,
    kinds: &Kinds,
    operator_namespace: &str,
) -> Controller<PoolObject> {
    let main = Api::<PoolObject>::namespaced_with(client.clone(), operator_namespace, &kinds.pool);
    let other =
        Api::<HandleObject>::namespaced_with(client.clone(), operator_namespace, &kinds.handle);
    let pool_kind = kinds.pool.clone();
    let config = watcher::Config::default().any_semantic();
    Controller::new_with(main, config.clone(), kinds.pool.clone()).watches_with(
        other,
        kinds.handle.clone(),
        config,
        move |handle: HandleObject| {
            handle.spec.resource_pool.as_ref().map(|pool| {
                ObjectRef::new_with(&pool.name, pool_kind.clone()).within(&pool.namespace)
            })
        },
    )
}

/// Runs `controller` until `shutdown`; `triggers` wake it from outside its watches.
pub async fn run(
    controller: Controller<PoolObject>,
    ctx: Arc<Context>,
    triggers: UnboundedReceiver<ObjectRef<PoolObject>>,
    concurrency: u16,
    shutdown: Shutdown,
) {
    controller
        .reconcile_on(triggers)
        .with_config(controller::Config::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

async fn reconcile(_pool: Arc<PoolObject>, _ctx: Arc<Context>) -> Result<Action, PoolError> {
    // Placeholder: the pool controller's work lands here (issue 4).
    Ok(Action::await_change())
}

fn error_policy(pool: Arc<PoolObject>, error: &PoolError, ctx: Arc<Context>) -> Action {
    let key = format!("pool/{}", pool.metadata.name.as_deref().unwrap_or_default());
    tracing::warn!(%error, %key, "pool reconcile failed");
    Action::requeue(ctx.retry_delay(&key))
}

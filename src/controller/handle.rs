//! The ResourceHandle controller (§12, §13, §14).

use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::context::Context;
use super::kinds::{ClaimObject, HandleObject, Kinds};
use crate::runtime::run::Shutdown;

#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// The controller, watching handles of the operator namespace, and claims: a claim change wakes its handle. Its store is the index of handles
/// every controller reads (`Context::stores`).
pub fn controller(
    client: &Client,
    kinds: &Kinds,
    operator_namespace: &str,
    claim_namespace: Option<&str>,
) -> Controller<HandleObject> {
    let main =
        Api::<HandleObject>::namespaced_with(client.clone(), operator_namespace, &kinds.handle);
    let other = match claim_namespace {
        Some(ns) => Api::<ClaimObject>::namespaced_with(client.clone(), ns, &kinds.claim),
        None => Api::<ClaimObject>::all_with(client.clone(), &kinds.claim),
    };
    let handle_kind = kinds.handle.clone();
    let namespace = operator_namespace.to_owned();
    let config = watcher::Config::default().any_semantic();
    Controller::new_with(main, config.clone(), kinds.handle.clone()).watches_with(
        other,
        kinds.claim.clone(),
        config,
        move |claim: ClaimObject| {
            let handle = claim
                .status
                .as_ref()
                .and_then(|s| s.resource_handle.as_ref());
            handle.map(|h| ObjectRef::new_with(&h.name, handle_kind.clone()).within(&namespace))
        },
    )
}

/// Runs `controller` until `shutdown`; `triggers` wake it from outside its watches.
pub async fn run(
    controller: Controller<HandleObject>,
    ctx: Arc<Context>,
    triggers: UnboundedReceiver<ObjectRef<HandleObject>>,
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

async fn reconcile(_handle: Arc<HandleObject>, _ctx: Arc<Context>) -> Result<Action, HandleError> {
    // Placeholder: the handle controller's work lands here (issue 4).
    Ok(Action::await_change())
}

fn error_policy(handle: Arc<HandleObject>, error: &HandleError, ctx: Arc<Context>) -> Action {
    let key = format!(
        "handle/{}",
        handle.metadata.name.as_deref().unwrap_or_default()
    );
    tracing::warn!(%error, %key, "handle reconcile failed");
    Action::requeue(ctx.retry_delay(&key))
}

//! The ResourceClaim controller (§6, §7).

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
pub enum ClaimError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// The controller, watching claims (in `claim_namespace`, or all namespaces), and handles: a handle change wakes its claim. Its store is the index of claims
/// every controller reads (`Context::stores`).
pub fn controller(
    client: &Client,
    kinds: &Kinds,
    operator_namespace: &str,
    claim_namespace: Option<&str>,
) -> Controller<ClaimObject> {
    let main = match claim_namespace {
        Some(ns) => Api::<ClaimObject>::namespaced_with(client.clone(), ns, &kinds.claim),
        None => Api::<ClaimObject>::all_with(client.clone(), &kinds.claim),
    };
    let other =
        Api::<HandleObject>::namespaced_with(client.clone(), operator_namespace, &kinds.handle);
    let claim_kind = kinds.claim.clone();
    let config = watcher::Config::default().any_semantic();
    Controller::new_with(main, config.clone(), kinds.claim.clone()).watches_with(
        other,
        kinds.handle.clone(),
        config,
        move |handle: HandleObject| {
            handle.spec.resource_claim.as_ref().map(|claim| {
                ObjectRef::new_with(&claim.name, claim_kind.clone()).within(&claim.namespace)
            })
        },
    )
}

/// Runs `controller` until `shutdown`; `triggers` wake it from outside its watches.
pub async fn run(
    controller: Controller<ClaimObject>,
    ctx: Arc<Context>,
    triggers: UnboundedReceiver<ObjectRef<ClaimObject>>,
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

async fn reconcile(_claim: Arc<ClaimObject>, _ctx: Arc<Context>) -> Result<Action, ClaimError> {
    // Placeholder: the claim controller's work lands here (issue 4).
    Ok(Action::await_change())
}

fn error_policy(claim: Arc<ClaimObject>, error: &ClaimError, ctx: Arc<Context>) -> Action {
    let key = format!(
        "claim/{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    );
    tracing::warn!(%error, %key, "claim reconcile failed");
    Action::requeue(ctx.retry_delay(&key))
}

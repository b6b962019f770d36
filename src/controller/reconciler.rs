//! What every controller does around its reconcile, written once: the reconcile is timed
//! (Poolboy's `poolboy_process_time_seconds`, whose count by `status` also counts reconciles
//! and errors), a success forgets the object's failures, and a failure is retried with the
//! object's own backoff (`Context::retry_delay`), so that a failing object never turns into a
//! retry storm. Conflicts, which each controller recomputes in its own loop, are counted here.
//! A version this process has itself replaced is not reconciled (`write::is_replaced`).
//! Every controller is also driven by one function ([`Reconciler::run`]).

use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Instant;

use futures::channel::mpsc::UnboundedReceiver;
use futures::{StreamExt, TryFuture};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::backlog::Backlog;
use super::context::Context;
use super::write;
use crate::shutdown::Shutdown;
use crate::store::health::WatchHealth;

/// How a controller is driven besides its own watches: what else wakes its objects, the
/// backlog they wait in (claims and handles, of which a start lists many), how many
/// reconciles run at once, and when to stop.
pub(crate) struct Drive<K: Resource> {
    pub(crate) triggers: Option<UnboundedReceiver<ObjectRef<K>>>,
    pub(crate) backlog: Option<Backlog<K>>,
    pub(crate) concurrency: u16,
    pub(crate) shutdown: Shutdown,
}

/// One controller's bookkeeping: the kind it reconciles, as the metrics label it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reconciler {
    kind: &'static str,
}

impl Reconciler {
    pub(crate) const fn new(kind: &'static str) -> Self {
        Self { kind }
    }

    /// Runs `reconcile` for `object`, timed and counted; a success forgets its failures.
    pub(crate) async fn observe<K, E>(
        &self,
        ctx: &Context,
        object: &K,
        reconcile: impl Future<Output = Result<Action, E>>,
    ) -> Result<Action, E>
    where
        K: ResourceExt + write::Identified,
    {
        if write::is_replaced(object) {
            return Ok(Action::await_change());
        }
        let started = Instant::now();
        let in_flight = ctx.metrics.reconcile_started(self.kind);
        let result = reconcile.await;
        drop(in_flight);
        let seconds = started.elapsed().as_secs_f64();
        ctx.metrics
            .observe(self.kind, "reconcile", result.is_ok(), seconds);
        ctx.metrics.reconciled(self.kind, result.is_ok(), seconds);
        if result.is_ok() {
            ctx.succeeded(&self.key(object));
        }
        result
    }

    /// The error policy: logged, then retried after the object's backoff.
    pub(crate) fn retry<K, E>(&self, ctx: &Context, object: &K, error: &E) -> Action
    where
        K: ResourceExt,
        E: Display,
    {
        let key = self.key(object);
        tracing::warn!(%error, kind = self.kind, %key, "reconcile failed");
        Action::requeue(ctx.retry_delay(&key))
    }

    /// A guarded write of this reconcile found the object changed (it is recomputed).
    pub(crate) fn conflict(&self, ctx: &Context) {
        ctx.metrics.conflict(self.kind);
    }

    /// Runs `controller` as `drive` says until it stops; every result reaches the backlog,
    /// which lets the next waiting object in, and `health` (`/readyz`).
    pub(crate) async fn run<K, Ctx, Fut>(
        &self,
        controller: Controller<K>,
        drive: Drive<K>,
        reconcile: impl FnMut(Arc<K>, Arc<Ctx>) -> Fut,
        error_policy: impl Fn(Arc<K>, &Fut::Error, Arc<Ctx>) -> Action,
        ctx: Arc<Ctx>,
        health: &WatchHealth,
    ) where
        K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Debug + Unpin + Hash + Eq + Clone + Send + Sync,
        Fut: TryFuture<Ok = Action> + Send + 'static,
        Fut::Error: std::error::Error + Send + 'static,
        Ctx: Send + Sync + 'static,
    {
        let Drive {
            triggers,
            backlog,
            concurrency,
            shutdown,
        } = drive;
        let controller = match (triggers, &backlog) {
            (Some(triggers), Some(backlog)) => controller.reconcile_on(backlog.triggers(triggers)),
            (Some(triggers), None) => controller.reconcile_on(triggers),
            (None, _) => controller,
        };
        let reconciles = controller
            .with_config(controller::Config::default().concurrency(concurrency))
            .graceful_shutdown_on(shutdown)
            .run(reconcile, error_policy, ctx)
            .inspect(move |result| {
                if let Some(backlog) = &backlog {
                    backlog.observe(result);
                }
            });
        health.drive(self.kind, reconciles).await;
    }

    /// The object's key in the failures map: its kind, namespace and name.
    fn key<K: ResourceExt>(&self, object: &K) -> String {
        format!(
            "{}/{}/{}",
            self.kind,
            object.namespace().unwrap_or_default(),
            object.name_any()
        )
    }
}

//! What every controller does around its reconcile, written once: the reconcile is timed
//! (Poolboy's `poolboy_process_time_seconds`, whose count by `status` also counts reconciles
//! and errors), a success forgets the object's failures, and a failure is retried with the
//! object's own backoff (`Context::retry_delay`), so that a failing object never turns into a
//! retry storm. Conflicts, which each controller recomputes in its own loop, are counted here.
//! A version this process has itself replaced is not reconciled (`write::is_replaced`).

use std::fmt::Display;
use std::future::Future;
use std::time::Instant;

use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::context::Context;
use super::write;

/// One controller's bookkeeping: the kind it reconciles, as the metrics label it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reconciler {
    kind: &'static str,
}

impl Reconciler {
    pub(crate) const fn new(kind: &'static str) -> Self {
        Self { kind }
    }

    /// The kind this controller reconciles.
    pub(crate) const fn kind(&self) -> &'static str {
        self.kind
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

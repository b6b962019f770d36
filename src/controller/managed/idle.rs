//! Stops the managed-resource watches that serve no handle any more: their store holds no
//! object and no reader has looked them up for a while ([`ManagedResources::stop_idle`]).
//! Users' namespaces come and go; without this, each one a handle ever made a resource in
//! would keep its watch, and its request to the API server every minute, for as long as the
//! broker runs.
//!
//! [`ManagedResources::stop_idle`]: super::resources::ManagedResources::stop_idle

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::MissedTickBehavior;

use crate::controller::context::Context;
use crate::shutdown::Shutdown;

/// The shortest time between two looks for idle watches.
const SHORTEST_LOOK_INTERVAL: Duration = Duration::from_secs(1);

/// Looks for idle watches twice in each `managed_watch_idle` of the configuration, and stops
/// them, until `shutdown`.
pub(crate) async fn stop_idle_watches(ctx: Arc<Context>, shutdown: Shutdown) {
    let idle = ctx.config.managed_watch_idle;
    let every = (idle / 2).max(SHORTEST_LOOK_INTERVAL);
    let mut looks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    looks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = looks.tick() => {}
        }
        let stopped = ctx.managed.stop_idle(Instant::now(), idle);
        if stopped.is_empty() {
            continue;
        }
        for key in &stopped {
            // A watch that was failing when it stopped fails no more.
            ctx.health.recovered(&key.to_string());
            tracing::info!(
                watch = %key,
                idle_seconds = idle.as_secs(),
                "stopped a managed-resource watch that holds no object and had no reader"
            );
        }
        ctx.metrics.managed_watches.set(ctx.managed.len() as i64);
    }
}

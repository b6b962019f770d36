//! The watches both benchmarks record from: when each claim is first seen bound, and each
//! handle's pool, binding and readiness.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use poolboy::api::kinds::{ClaimObject, HandleObject, Kinds};

use crate::machine::lock;
use crate::recording::{Promptly, report};

/// Calls `first_bound` with a claim's name each time the watch shows it bound (its status
/// names a handle); the caller keeps the first instant.
pub async fn record_binds(
    claims: Api<ClaimObject>,
    config: watcher::Config,
    first_bound: impl Fn(String),
) {
    watcher(claims, config)
        .backoff(Promptly)
        .applied_objects()
        .for_each(|claim| {
            report("claims", &claim);
            if let Ok(claim) = claim
                && let (Some(name), Some(_)) = (
                    claim.metadata.name.clone(),
                    claim
                        .status
                        .as_ref()
                        .and_then(|s| s.resource_handle.as_ref()),
                )
            {
                first_bound(name);
            }
            async {}
        })
        .await;
}

/// A handle as the benchmarks count it.
#[derive(Clone, Debug)]
pub struct HandleState {
    pub pool: Option<String>,
    pub bound: bool,
    pub ready: bool,
}

/// The handles a watch shows, by name.
#[derive(Default)]
pub struct HandleStates(HashMap<String, HandleState>);

impl HandleStates {
    /// The ready unbound handles of `pool`.
    pub fn ready_unbound(&self, pool: &str) -> usize {
        self.0
            .values()
            .filter(|h| h.pool.as_deref() == Some(pool) && !h.bound && h.ready)
            .count()
    }

    /// Every handle of `pool`.
    #[allow(dead_code)] // only benches/claims.rs counts a pool's refills
    pub fn of_pool(&self, pool: &str) -> usize {
        self.0
            .values()
            .filter(|h| h.pool.as_deref() == Some(pool))
            .count()
    }
}

/// Keeps `states` as the watch of `handles` shows them.
pub async fn follow_handles(
    handles: Api<HandleObject>,
    config: watcher::Config,
    states: Arc<Mutex<HandleStates>>,
) {
    watcher(handles, config)
        .backoff(Promptly)
        .for_each(|event| {
            report("handles", &event);
            let mut states = lock(&states);
            match event {
                Ok(watcher::Event::Apply(h) | watcher::Event::InitApply(h)) => {
                    let state = HandleState {
                        pool: h.spec.resource_pool.as_ref().map(|p| p.name.clone()),
                        bound: h.spec.resource_claim.is_some(),
                        ready: h.status.as_ref().and_then(|s| s.ready) == Some(true),
                    };
                    states
                        .0
                        .insert(h.metadata.name.clone().unwrap_or_default(), state);
                }
                Ok(watcher::Event::Delete(h)) => {
                    states
                        .0
                        .remove(h.metadata.name.as_deref().unwrap_or_default());
                }
                _ => {}
            }
            async {}
        })
        .await;
}

/// Watches the claims, handles and ConfigMaps of `namespace` as a broker does, decoding each
/// event as the broker's types and keeping nothing: what a broker's watches cost the API server
/// beside every other watcher's, until the task is aborted.
#[allow(dead_code)] // only benches/claims.rs weighs a broker's watches alone
pub fn watch_as_a_broker(
    client: Client,
    namespace: &str,
    kinds: &Kinds,
) -> tokio::task::JoinHandle<()> {
    let claims = Api::<ClaimObject>::namespaced_with(client.clone(), namespace, &kinds.claim);
    let handles = Api::<HandleObject>::namespaced_with(client.clone(), namespace, &kinds.handle);
    let configmaps = Api::<ConfigMap>::namespaced(client, namespace);
    let config = watcher::Config::default;
    tokio::spawn(async move {
        futures::future::join3(
            watcher(claims, config())
                .default_backoff()
                .for_each(|_| async {}),
            watcher(handles, config())
                .default_backoff()
                .for_each(|_| async {}),
            watcher(configmaps, config())
                .default_backoff()
                .for_each(|_| async {}),
        )
        .await;
    })
}

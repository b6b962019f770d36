//! Leader election: with `poolboy run --lease NAME`, replicas share the work by taking turns.
//! Only the holder of Lease `NAME` in the operator namespace watches and reconciles; the others
//! wait for it. A holder that stops renewing (killed, partitioned) loses the Lease when it
//! expires, and a waiting replica takes over; a holder that finds it has lost the Lease stops at
//! once, and one paused past the expiry starts no write when it wakes (`runtime::fence`). On
//! shutdown the holder releases the Lease, so a rolling update hands over without waiting for the
//! expiry. The Lease is kube-lease-manager's (server-side apply of `coordination.k8s.io/v1` Lease).

use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::fence::WriteFence;
use crate::store::health::WatchHealth;

/// How long a Lease holds without renewal: a replica takes over at most this long after the
/// holder stopped renewing.
pub const LEASE_SECONDS: u64 = 15;
/// How long before its expiry the holder renews the Lease: its writes stop 2 s before the
/// expiry unless a renewal was answered (`runtime::fence`), so a renewal has 5 s to be.
const RENEW_BEFORE_SECONDS: u64 = 7;
/// How long a release on shutdown may take.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("cannot use Lease {name}: {source}")]
    Manager {
        name: String,
        #[source]
        source: LeaseManagerError,
    },
}

/// The Lease this process holds, from [`acquire`] until dropped or [`Leadership::release`]d.
pub(crate) struct Leadership {
    holding: watch::Receiver<bool>,
    manager: JoinHandle<Result<LeaseManager, LeaseManagerError>>,
}

/// This process as a candidate for Lease `name` of `namespace`.
pub(crate) struct Candidate {
    namespace: String,
    name: String,
    /// Who it is in the Lease: its instance (the Pod's name) and process id, so that a
    /// restarted process does not take itself for the holder it replaced.
    identity: String,
}

impl Candidate {
    /// This process, `instance`, as a candidate for Lease `name` of `namespace`.
    pub(crate) fn new(namespace: &str, name: &str, instance: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: format!("{instance}-{}", std::process::id()),
        }
    }

    /// The fence its client's writes pass: open while its last renewal of the Lease lasts.
    pub(crate) fn fence(&self) -> WriteFence {
        let duration = Duration::from_secs(LEASE_SECONDS);
        WriteFence::new(&self.namespace, &self.name, &self.identity, duration)
    }
}

/// Waits until this process holds the Lease it is a `candidate` for; `None` when `shutdown`
/// comes first.
///
/// kube-lease-manager's standby sleeps until the holder's Lease would expire, so a holder that
/// released it on a graceful stop would still be waited for. The Lease is watched as well: once
/// a holder gives it up, a fresh manager is started, which takes it at once. That watch reports
/// to `health` while it runs: a standby that cannot watch the Lease would take over only at its
/// expiry, and its `/readyz` says so.
pub(crate) async fn acquire(
    client: Client,
    candidate: &Candidate,
    health: &WatchHealth,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<Option<Leadership>, LeaseError> {
    let watch = format!("Lease {}", candidate.name);
    let acquired = wait_to_hold(client, candidate, health, &watch, shutdown).await;
    // The watch ends here: a failure it had says nothing of the holder's watches.
    health.recovered(&watch);
    acquired
}

/// [`acquire`], its Lease watched as `watch` in `health`.
async fn wait_to_hold(
    client: Client,
    candidate: &Candidate,
    health: &WatchHealth,
    watch: &str,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<Option<Leadership>, LeaseError> {
    let Candidate {
        namespace,
        name,
        identity,
    } = candidate;
    let (namespace, name) = (namespace.as_str(), name.as_str());
    let manager_error = |source| LeaseError::Manager {
        name: name.to_owned(),
        source,
    };
    let mut shutdown = std::pin::pin!(shutdown);
    tracing::info!(lease = name, %identity, "waiting to hold the Lease");
    loop {
        let manager = LeaseManagerBuilder::new(client.clone(), name)
            .with_namespace(namespace)
            .with_identity(identity)
            .with_duration(LEASE_SECONDS)
            .with_grace(RENEW_BEFORE_SECONDS)
            .build()
            .await
            .map_err(manager_error)?;
        let (mut holding, manager) = manager.watch().await;
        tokio::select! {
            held = holding.wait_for(|holding| *holding).map(|held| held.is_ok()) => {
                if !held {
                    let source = match manager.await {
                        Ok(Err(error)) => error,
                        _ => LeaseManagerError::InconsistentState("the Lease manager stopped".into()),
                    };
                    return Err(manager_error(source));
                }
                tracing::info!(lease = name, %identity, "holding the Lease: starting the controllers");
                return Ok(Some(Leadership { holding, manager }));
            }
            () = released(client.clone(), candidate, health, watch) => {
                // Not holding it: the manager only slept. A fresh one takes the free Lease.
                manager.abort();
                tracing::info!(lease = name, "the holder released the Lease");
            }
            () = &mut shutdown => return Ok(None),
        }
    }
}

/// Returns once the `candidate`'s Lease, held by another process when first seen, is held by
/// nobody (its holder released it). Watch errors are waited out (the watcher backs off) and
/// go to `health` as watch `watch`; without a Lease to watch it never returns, and the
/// manager's own timing applies.
async fn released(client: Client, candidate: &Candidate, health: &WatchHealth, watch: &str) {
    let api: Api<Lease> = Api::namespaced(client, &candidate.namespace);
    let name = &candidate.name;
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut held_by_another = false;
    let mut events = std::pin::pin!(
        health
            .watch(watch.to_owned(), api, config)
            .applied_objects()
    );
    while let Some(event) = events.next().await {
        let Ok(lease) = event else { continue };
        let holder = lease
            .spec
            .and_then(|spec| spec.holder_identity)
            .filter(|holder| !holder.is_empty());
        match holder {
            Some(holder) => held_by_another = holder != candidate.identity,
            None if held_by_another => return,
            None => {}
        }
    }
    std::future::pending::<()>().await;
}

impl Leadership {
    /// Completes when this process no longer holds the Lease.
    pub(crate) async fn lost(&mut self) {
        // An error means the manager ended: the Lease is not being renewed either.
        self.holding.wait_for(|holding| !*holding).map(|_| ()).await;
    }

    /// Gives the Lease up, so that another replica takes over at once.
    pub(crate) async fn release(self) {
        drop(self.holding);
        // The manager releases the Lease when its channel closes.
        let _ = tokio::time::timeout(RELEASE_TIMEOUT, self.manager).await;
    }
}

//! A controller's own view of a related kind: a watch reflected into a store that is written
//! before the controller is woken (so a reconcile woken by a change always reads it), with a
//! "listed once" signal any number of reconciles can wait on.
//!
//! kube-runtime 5's `Store::wait_until_ready` wakes only the last of several concurrent
//! waiters (one waker in a oneshot receiver), so parallel reconciles waiting on it would hang;
//! hence the signal here.
//!
//! Why each controller keeps its own watches (handles are watched three times, pools twice;
//! claims once, their watch waking the handle controller too, see `claim::controller`) rather than kube-runtime 5's shared streams (`store_shared`, `reflect_shared`,
//! `Writer::subscribe`, `Controller::for_shared_stream`), checked in kube-runtime 5.0.0's
//! source: the shared reflector does write its store before it wakes subscribers, but
//! - it broadcasts `Apply` and `InitDone` only, never `Delete`: the claim controller would not
//!   hear that its handle is gone (§7 step 5), nor a pool that a handle was deleted;
//! - a subscriber reads the object back from the store when polled, and when it is gone by
//!   then, `ReflectHandle` returns `Pending` without registering a waker: the event is lost,
//!   and the subscriber sleeps until something else wakes its task;
//! - a controller built on a shared store holds its runner on `Store::wait_until_ready` of
//!   that store, and a second controller on the same store is the lost-waker hang above.
//!
//! Sharing needs our own fan-out instead: one watcher per kind reflected into one store, then
//! every touched object sent to each subscribing controller (its own kind's controller through
//! `Controller::for_stream_with`, whose runner is then the store's only `wait_until_ready`
//! waiter, the others through `watches_stream_with`).

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::{Stream, TryStreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

/// How long the API server keeps one watch request open (kube-runtime's default is 290 s).
/// A watch made while kube-apiserver was going down can stay open but silent, so no event
/// reaches its controller until the request ends: `make chaos` saw handles created after an
/// API-server restart go unnoticed for almost four minutes. Ending every watch after a minute
/// (and failing a read silent for longer, `poolboy run`'s read timeout) bounds that; an idle
/// broker pays one watch request per minute per watch, and no list.
pub(crate) const WATCH_TIMEOUT_SECS: u32 = 60;

/// The watch configuration every watch of the broker starts from.
pub(crate) fn watch_config() -> watcher::Config {
    watcher::Config::default().timeout(WATCH_TIMEOUT_SECS)
}

/// A store and whether its watch has listed once. Cheap to clone.
#[derive(Clone)]
pub(crate) struct ListedStore<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    listed: Arc<watch::Sender<bool>>,
}

impl<K: Resource + Clone + 'static> ListedStore<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    pub(crate) fn store(&self) -> &Store<K> {
        &self.store
    }

    /// The store `writer` fills, not listed yet: whoever feeds the writer calls
    /// [`ListedStore::mark_listed`] after the first list.
    pub(crate) fn of(writer: &reflector::store::Writer<K>) -> Self {
        Self {
            store: writer.as_reader(),
            listed: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Lets every waiter of [`ListedStore::wait_until_listed`] through, now and from now on.
    pub(crate) fn mark_listed(&self) {
        self.listed.send_replace(true);
    }

    /// A store whose contents are complete already (tests build one by hand).
    #[cfg(test)]
    pub(crate) fn listed(store: Store<K>) -> Self {
        Self {
            store,
            listed: Arc::new(watch::Sender::new(true)),
        }
    }

    /// Waits until the watch has listed every object once; any number of callers at once.
    pub(crate) async fn wait_until_listed(&self) {
        let mut listed = self.listed.subscribe();
        // Err only when the sender is gone, and `self` holds it.
        let _ = listed.wait_for(|listed| *listed).await;
    }
}

/// `object` as every store of the broker keeps it, and as templates see a live resource: without
/// `metadata.managedFields`, as Poolboy's cache keeps objects (#121). No decision reads them,
/// and they are most of a small object: kept, every pass that copied a handle out of a store
/// copied them too (issue 11: a fifth of a warm burst's CPU), and every store held them.
pub(crate) fn without_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Watches `api`, reflecting into a [`ListedStore`]; the stream (for a controller's
/// `watches_stream_with`) yields each touched object after the store has it, and after
/// `follow` has seen its event (an index kept beside the store).
pub(crate) fn reflected_watch<K>(
    api: Api<K>,
    config: watcher::Config,
    dyntype: K::DynamicType,
    follow: impl Fn(&watcher::Event<K>) + Send + 'static,
) -> (
    ListedStore<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    let writer = reflector::store::Writer::new(dyntype);
    let listed = ListedStore::of(&writer);
    let signal = listed.clone();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(without_managed_fields)
        .reflect(writer)
        .inspect_ok(move |event| {
            follow(event);
            if matches!(event, watcher::Event::InitDone) {
                signal.mark_listed();
            }
        })
        .touched_objects();
    (listed, stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[tokio::test]
    async fn every_concurrent_waiter_learns_that_the_store_is_listed() {
        let writer = reflector::store::Writer::<ConfigMap>::default();
        let listed = ListedStore {
            store: writer.as_reader(),
            listed: Arc::new(watch::Sender::new(false)),
        };
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let listed = listed.clone();
                tokio::spawn(async move { listed.wait_until_listed().await })
            })
            .collect();
        listed.listed.send_replace(true);
        for waiter in waiters {
            tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
                .await
                .expect("no waiter hangs")
                .expect("the waiter ran");
        }
    }
}

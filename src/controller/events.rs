//! kube's Event `Recorder`s, one per object: a `Recorder` keeps every Event it published for
//! six minutes (to count repeats into a series) and its table never shrinks, so one shared by
//! all objects held a burst's Events, and their table, for good. Events of one object only
//! ever join that object's series, so a `Recorder` each publishes the same Events; the one of a
//! deleted object goes with its watch's delete event, an idle one once its Events expired.
//!
//! Events are published beside the reconciles, [`PUBLISHED_AT_ONCE`] at a time: each is a
//! request of its own, and a burst of binds otherwise had all its Events in flight at once, each
//! on a connection of the client's pool, opened for it (a TLS handshake) when none was idle.
//! While the broker is behind ([`Backlogged`]), they wait, at most [`YIELD_AT_MOST`]: a burst's
//! binds get the API server's time first, and its Events follow (docs/design.md,
//! "controller::events").

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use std::fmt::Debug;
use std::hash::Hash;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder, Reporter};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{Semaphore, watch};

use super::backlogged::Backlogged;
use crate::store::shared_watch::{SharedWatch, Stored};

/// How long a `Recorder` keeps an Event it published (kube-runtime's `CACHE_TTL`): one idle
/// that long holds nothing a later Event could join.
const KEPT_FOR: Duration = Duration::from_secs(6 * 60);

/// The Events published at once; the others wait their turn (a fair semaphore: first come, first
/// served).
pub(crate) const PUBLISHED_AT_ONCE: usize = 4;

/// How long an Event waits at most for the broker to catch up ([`Backlogged`]): longer than a
/// burst of a thousand binds takes on a small API server, short enough that a broker behind
/// for good still says what it did while it is still news.
const YIELD_AT_MOST: Duration = Duration::from_secs(30);

/// Shared by the watches (which it follows) and the controllers. Cheap to clone.
#[derive(Clone)]
pub(crate) struct EventRecorders {
    client: Client,
    reporter: Reporter,
    inner: Arc<Mutex<Inner>>,
    publishing: Arc<Semaphore>,
    backlogged: Backlogged,
    /// How many Events are not published yet ([`EventRecorders::flush`]).
    pending: Arc<watch::Sender<usize>>,
}

struct Inner {
    /// Each object's `Recorder` by uid, with when it last published.
    by_uid: HashMap<String, (Instant, Recorder)>,
    last_sweep: Instant,
}

impl EventRecorders {
    /// Recorders publishing through `client` as `reporter`, yielding to `backlogged`.
    pub(crate) fn new(client: Client, reporter: Reporter, backlogged: Backlogged) -> Self {
        let inner = Inner {
            by_uid: HashMap::new(),
            last_sweep: Instant::now(),
        };
        Self {
            client,
            reporter,
            inner: Arc::new(Mutex::new(inner)),
            publishing: Arc::new(Semaphore::new(PUBLISHED_AT_ONCE)),
            backlogged,
            pending: Arc::new(watch::Sender::new(0)),
        }
    }

    /// Publishes `event` about `reference`, the object `uid` ("" for one without), in the
    /// background (it returns at once); failures are logged, never fatal.
    pub(crate) fn publish(&self, uid: &str, event: Event, reference: ObjectReference) {
        let raised = tokio::time::Instant::now();
        let recorder = self.recorder(uid, raised.into_std());
        let publishing = self.publishing.clone();
        let backlogged = self.backlogged.clone();
        let pending = Pending::count(&self.pending);
        tokio::spawn(async move {
            let _pending = pending;
            // Never closed: the semaphore is dropped with its last task.
            let Ok(_turn) = publishing.acquire_owned().await else {
                return;
            };
            let caught_up = backlogged.caught_up();
            // Past the wait, it goes out whether the broker caught up or not.
            let _ = tokio::time::timeout_at(raised + YIELD_AT_MOST, caught_up).await;
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::warn!(%error, reason = event.reason, "cannot publish Event");
            }
        });
    }

    /// How many Events were raised and are not published yet.
    pub(crate) fn waiting(&self) -> usize {
        *self.pending.borrow()
    }

    /// Publishes the Events still waiting without waiting any more, and returns once none is
    /// left or `within` has passed: the controllers have stopped, and the process is leaving.
    pub(crate) async fn flush(&self, within: Duration) {
        self.backlogged.stop_holding();
        let mut pending = self.pending.subscribe();
        let published = pending.wait_for(|pending| *pending == 0);
        if tokio::time::timeout(within, published).await.is_err() {
            let left = *self.pending.borrow();
            tracing::warn!(left, "stopping before every Event was published");
        }
    }

    /// Lets the objects `watch` watches take their `Recorder` with them when deleted.
    pub(crate) fn follow<K>(&self, watch: &mut SharedWatch<K>)
    where
        K: Stored + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let recorders = self.clone();
        watch.follow_deletes(move |object| recorders.deleted(object));
    }

    fn deleted<K: Resource>(&self, object: &K) {
        if let Some(uid) = &object.meta().uid {
            let mut inner = self.lock();
            inner.by_uid.remove(uid);
            // A table grown for a burst is given back once it is mostly empty.
            if inner.by_uid.len() * 4 < inner.by_uid.capacity() {
                inner.by_uid.shrink_to_fit();
            }
        }
    }

    /// The `Recorder` of object `uid` ("" for one without), as of `now`.
    fn recorder(&self, uid: &str, now: Instant) -> Recorder {
        let mut inner = self.lock();
        if now.duration_since(inner.last_sweep) >= KEPT_FOR {
            inner.last_sweep = now;
            inner
                .by_uid
                .retain(|_, (used, _)| now.duration_since(*used) < KEPT_FOR);
            inner.by_uid.shrink_to_fit();
        }
        let (used, recorder) = inner.by_uid.entry(uid.to_owned()).or_insert_with(|| {
            let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
            (now, recorder)
        });
        *used = now;
        recorder.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One Event counted in [`EventRecorders::pending`] until this is dropped: published, failed,
/// or dropped with its task.
struct Pending(Arc<watch::Sender<usize>>);

impl Pending {
    fn count(pending: &Arc<watch::Sender<usize>>) -> Self {
        pending.send_modify(|count| *count += 1);
        Self(pending.clone())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.send_modify(|count| *count = count.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn reporter() -> Reporter {
        Reporter {
            controller: "poolboy".into(),
            instance: None,
        }
    }

    fn recorders() -> EventRecorders {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        let client = Client::try_from(config).expect("a client (never called)");
        EventRecorders::new(client, reporter(), Backlogged::default())
    }

    fn kept(recorders: &EventRecorders) -> Vec<String> {
        let mut uids: Vec<String> = recorders.lock().by_uid.keys().cloned().collect();
        uids.sort();
        uids
    }

    /// An API server that counts the requests it holds, held most, and answered. One that
    /// holds them answers each when told by `release`.
    #[derive(Default)]
    struct Server {
        holds: bool,
        held: AtomicUsize,
        most_held: AtomicUsize,
        answered: AtomicUsize,
        release: tokio::sync::Notify,
    }

    impl Server {
        fn holding() -> Arc<Self> {
            Arc::new(Self {
                holds: true,
                ..Self::default()
            })
        }

        fn answering() -> Arc<Self> {
            Arc::new(Self::default())
        }

        fn answered(&self) -> usize {
            self.answered.load(Ordering::SeqCst)
        }

        /// Recorders publishing to this server, yielding to `backlogged`.
        fn recorders(self: &Arc<Self>, backlogged: Backlogged) -> EventRecorders {
            let server = self.clone();
            let service = tower::service_fn(move |_: http::Request<kube::client::Body>| {
                let server = server.clone();
                async move {
                    let now = server.held.fetch_add(1, Ordering::SeqCst) + 1;
                    server.most_held.fetch_max(now, Ordering::SeqCst);
                    if server.holds {
                        server.release.notified().await;
                    }
                    server.held.fetch_sub(1, Ordering::SeqCst);
                    server.answered.fetch_add(1, Ordering::SeqCst);
                    http::Response::builder()
                        .status(500)
                        .body(http_body_util::Full::new(bytes::Bytes::from_static(b"{}")))
                }
            });
            EventRecorders::new(Client::new(service, "default"), reporter(), backlogged)
        }
    }

    /// An API server that answers at once, and recorders publishing to it while the broker is
    /// behind until told otherwise (the `Backlogged` returned).
    fn behind() -> (Arc<Server>, Backlogged, EventRecorders) {
        let server = Server::answering();
        let backlogged = Backlogged::default();
        let recorders = server.recorders(backlogged.clone());
        backlogged.report(true);
        (server, backlogged, recorders)
    }

    /// Publishes a `Bound` Event about claim `index`.
    fn publish_bound(recorders: &EventRecorders, index: usize) {
        let reference = ObjectReference {
            name: Some(format!("claim-{index}")),
            namespace: Some("user".into()),
            ..ObjectReference::default()
        };
        let event = Event {
            type_: kube::runtime::events::EventType::Normal,
            reason: "Bound".into(),
            note: None,
            action: "Bound".into(),
            secondary: None,
        };
        recorders.publish(&format!("uid-{index}"), event, reference);
    }

    #[tokio::test]
    async fn a_deleted_object_takes_its_recorder_with_it() {
        let recorders = recorders();
        let now = Instant::now();
        recorders.recorder("uid-a", now);
        recorders.recorder("uid-b", now);
        let claim: crate::api::kinds::ClaimObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
            "metadata": {"name": "a", "namespace": "user", "uid": "uid-a"},
            "spec": {},
        }))
        .expect("a claim");
        recorders.deleted(&claim);
        assert_eq!(kept(&recorders), ["uid-b"]);
    }

    /// A burst of Events is published a few at a time: the API server holds each request
    /// until told, and counts how many it holds at once.
    #[tokio::test]
    async fn a_burst_of_events_is_published_a_few_at_a_time() {
        const BURST: usize = 3 * PUBLISHED_AT_ONCE;
        let server = Server::holding();
        let recorders = server.recorders(Backlogged::default());
        for index in 0..BURST {
            publish_bound(&recorders, index);
        }
        while server.answered() < BURST {
            tokio::time::sleep(Duration::from_millis(5)).await;
            server.release.notify_waiters();
        }
        assert_eq!(server.most_held.load(Ordering::SeqCst), PUBLISHED_AT_ONCE);
    }

    #[tokio::test(start_paused = true)]
    async fn events_wait_while_the_broker_is_behind_and_go_once_it_caught_up() {
        let (server, backlogged, recorders) = behind();
        for index in 0..2 * PUBLISHED_AT_ONCE {
            publish_bound(&recorders, index);
        }
        tokio::time::sleep(YIELD_AT_MOST / 2).await;
        assert_eq!(server.answered(), 0);
        assert_eq!(recorders.waiting(), 2 * PUBLISHED_AT_ONCE);
        backlogged.report(false);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(server.answered(), 2 * PUBLISHED_AT_ONCE);
        assert_eq!(recorders.waiting(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_goes_once_it_waited_its_longest_however_far_behind_the_broker_is() {
        let (server, _, recorders) = behind();
        publish_bound(&recorders, 0);
        tokio::time::sleep(YIELD_AT_MOST - Duration::from_secs(1)).await;
        publish_bound(&recorders, 1);
        assert_eq!(server.answered(), 0);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(server.answered(), 1, "the first Event waited its longest");
        tokio::time::sleep(YIELD_AT_MOST).await;
        assert_eq!(server.answered(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_flush_publishes_the_waiting_events_at_once() {
        let (server, _, recorders) = behind();
        for index in 0..3 {
            publish_bound(&recorders, index);
        }
        let flushed = tokio::time::timeout(Duration::from_secs(1), recorders.flush(YIELD_AT_MOST));
        flushed.await.expect("flushed without waiting");
        assert_eq!(server.answered(), 3);
    }

    #[tokio::test]
    async fn a_recorder_idle_past_its_events_expiry_goes() {
        let recorders = recorders();
        let start = Instant::now();
        recorders.recorder("idle", start);
        recorders.recorder("busy", start + KEPT_FOR / 2);
        recorders.recorder("busy", start + KEPT_FOR);
        assert_eq!(kept(&recorders), ["busy"]);
    }
}

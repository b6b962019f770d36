//! kube's Event `Recorder`s, one per object: a `Recorder` keeps every Event it published for
//! six minutes (to count repeats into a series) and its table never shrinks, so one shared by
//! all objects held a burst's Events, and their table, for good. Events of one object only
//! ever join that object's series, so a `Recorder` each publishes the same Events; the one of a
//! deleted object goes with its watch's delete event, an idle one once its Events expired.
//!
//! Events are published beside the reconciles, [`PUBLISHED_AT_ONCE`] at a time: each is a
//! request of its own, and a burst of binds otherwise had all its Events in flight at once, each
//! on a connection of the client's pool, opened for it (a TLS handshake) when none was idle.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use std::fmt::Debug;
use std::hash::Hash;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder, Reporter};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Semaphore;

use crate::store::shared_watch::{SharedWatch, Stored};

/// How long a `Recorder` keeps an Event it published (kube-runtime's `CACHE_TTL`): one idle
/// that long holds nothing a later Event could join.
const KEPT_FOR: Duration = Duration::from_secs(6 * 60);

/// The Events published at once; the others wait their turn (a fair semaphore: first come, first
/// served).
pub(crate) const PUBLISHED_AT_ONCE: usize = 4;

/// Shared by the watches (which it follows) and the controllers. Cheap to clone.
#[derive(Clone)]
pub(crate) struct EventRecorders {
    client: Client,
    reporter: Reporter,
    inner: Arc<Mutex<Inner>>,
    publishing: Arc<Semaphore>,
}

struct Inner {
    /// Each object's `Recorder` by uid, with when it last published.
    by_uid: HashMap<String, (Instant, Recorder)>,
    last_sweep: Instant,
}

impl EventRecorders {
    pub(crate) fn new(client: Client, reporter: Reporter) -> Self {
        let inner = Inner {
            by_uid: HashMap::new(),
            last_sweep: Instant::now(),
        };
        Self {
            client,
            reporter,
            inner: Arc::new(Mutex::new(inner)),
            publishing: Arc::new(Semaphore::new(PUBLISHED_AT_ONCE)),
        }
    }

    /// Publishes `event` about `reference`, the object `uid` ("" for one without), in the
    /// background (it returns at once); failures are logged, never fatal.
    pub(crate) fn publish(&self, uid: &str, event: Event, reference: ObjectReference) {
        let recorder = self.recorder(uid, Instant::now());
        let publishing = self.publishing.clone();
        tokio::spawn(async move {
            // Never closed: the semaphore is dropped with its last task.
            let Ok(_turn) = publishing.acquire_owned().await else {
                return;
            };
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::warn!(%error, reason = event.reason, "cannot publish Event");
            }
        });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn recorders() -> EventRecorders {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        let client = Client::try_from(config).expect("a client (never called)");
        let reporter = Reporter {
            controller: "poolboy".into(),
            instance: None,
        };
        EventRecorders::new(client, reporter)
    }

    fn kept(recorders: &EventRecorders) -> Vec<String> {
        let mut uids: Vec<String> = recorders.lock().by_uid.keys().cloned().collect();
        uids.sort();
        uids
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

    /// A burst of Events is published a few at a time: a client whose API server holds each
    /// request until told counts how many it holds at once.
    #[tokio::test]
    async fn a_burst_of_events_is_published_a_few_at_a_time() {
        use std::sync::atomic::{AtomicUsize, Ordering};

        /// What the API server holds, held most, and answered; told to answer by `release`.
        #[derive(Default)]
        struct Server {
            held: AtomicUsize,
            most_held: AtomicUsize,
            answered: AtomicUsize,
            release: tokio::sync::Notify,
        }

        const BURST: usize = 3 * PUBLISHED_AT_ONCE;
        let server = Arc::new(Server::default());
        let service = {
            let server = server.clone();
            tower::service_fn(move |_: http::Request<kube::client::Body>| {
                let server = server.clone();
                async move {
                    let now = server.held.fetch_add(1, Ordering::SeqCst) + 1;
                    server.most_held.fetch_max(now, Ordering::SeqCst);
                    server.release.notified().await;
                    server.held.fetch_sub(1, Ordering::SeqCst);
                    server.answered.fetch_add(1, Ordering::SeqCst);
                    http::Response::builder()
                        .status(500)
                        .body(http_body_util::Full::new(bytes::Bytes::from_static(b"{}")))
                }
            })
        };
        let recorders = EventRecorders::new(
            Client::new(service, "default"),
            Reporter {
                controller: "poolboy".into(),
                instance: None,
            },
        );
        for i in 0..BURST {
            let reference = ObjectReference {
                name: Some(format!("claim-{i}")),
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
            recorders.publish(&format!("uid-{i}"), event, reference);
        }
        while server.answered.load(Ordering::SeqCst) < BURST {
            tokio::time::sleep(Duration::from_millis(5)).await;
            server.release.notify_waiters();
        }
        assert_eq!(server.most_held.load(Ordering::SeqCst), PUBLISHED_AT_ONCE);
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

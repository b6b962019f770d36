//! kube's Event `Recorder`s, one per object: a `Recorder` keeps every Event it published for
//! six minutes (to count repeats into a series) and its table never shrinks, so one shared by
//! all objects held a burst's Events, and their table, for good. Events of one object only
//! ever join that object's series, so a `Recorder` each publishes the same Events; the one of a
//! deleted object goes with its watch's delete event, an idle one once its Events expired.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use std::fmt::Debug;
use std::hash::Hash;

use kube::runtime::events::{Recorder, Reporter};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::store::shared_watch::{SharedWatch, Stored};

/// How long a `Recorder` keeps an Event it published (kube-runtime's `CACHE_TTL`): one idle
/// that long holds nothing a later Event could join.
const KEPT_FOR: Duration = Duration::from_secs(6 * 60);

/// Shared by the watches (which it follows) and the controllers. Cheap to clone.
#[derive(Clone)]
pub(crate) struct EventRecorders {
    client: Client,
    reporter: Reporter,
    inner: Arc<Mutex<Inner>>,
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
    pub(crate) fn recorder(&self, uid: &str, now: Instant) -> Recorder {
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

//! Whether the broker's watches work: `/readyz` turns not-ready while a watch keeps
//! failing, e.g. when the broker lost its rights to list a kind or cannot reach the API
//! server, instead of reporting ready on stale stores.

use std::collections::HashMap;
use std::fmt::{Debug, Display};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use serde::de::DeserializeOwned;

/// A failure older than this, with none since, is over: a watch retries with a backoff of at
/// most 30 s, so one that keeps failing reports again well within it. A watch that works again
/// says so sooner: at its next answer, or when the API server accepts its next request.
const FAILURE_MEMORY: Duration = Duration::from_secs(60);

/// The last failure of one watch.
struct Failure {
    at: Instant,
    error: String,
    /// The collection the watch reads (`Api::resource_url`).
    path: String,
}

impl Failure {
    fn current(&self) -> bool {
        self.at.elapsed() < FAILURE_MEMORY
    }
}

/// The last failure of each watch that has not recovered since, by name.
#[derive(Clone, Default)]
pub(crate) struct WatchHealth {
    failures: Arc<Mutex<HashMap<String, Failure>>>,
    /// Whether `failures` holds any: every event of every watch is a recovery to note, and
    /// nearly all of them find nothing to recover from without taking the lock.
    any: Arc<AtomicBool>,
}

impl WatchHealth {
    /// The failures, whatever a panic left them as (they are only timestamps and messages).
    fn failures(&self) -> MutexGuard<'_, HashMap<String, Failure>> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Watch `name` of the collection at `path` failed with `error`. The log says so when it
    /// starts failing, not at each retry.
    pub(crate) fn failed(&self, name: &str, path: &str, error: &impl Display) {
        let error = error.to_string();
        let mut failures = self.failures();
        if !failures.get(name).is_some_and(Failure::current) {
            tracing::warn!(watch = name, %error, "watch failing: /readyz reports not ready until it works");
        }
        let failure = Failure {
            at: Instant::now(),
            error,
            path: path.to_owned(),
        };
        failures.insert(name.to_owned(), failure);
        self.any.store(true, Ordering::Release);
    }

    /// Watch `name` works (or is gone): it fails no more.
    pub(crate) fn recovered(&self, name: &str) {
        self.recover(|failed, _| failed == name);
    }

    /// The API server accepted a watch of the collection at `path`: its watches work again.
    /// A watch that resumes where it was yields nothing until the next change of what it
    /// watches, which may be long in coming; its request being accepted is what shows it
    /// works. Two watches of one collection send the same request (the Accept header aside),
    /// so one's answer tells for both.
    pub(crate) fn answered(&self, path: &str) {
        self.recover(|_, failure| failure.path == path);
    }

    /// Forgets the failures `recovers` picks, and those that are over.
    fn recover(&self, recovers: impl Fn(&str, &Failure) -> bool) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut failures = self.failures();
        failures.retain(|name, failure| {
            let recovered = recovers(name, failure);
            if recovered {
                tracing::info!(watch = name, "watch works again");
            }
            !recovered && failure.current()
        });
        self.any.store(!failures.is_empty(), Ordering::Release);
    }

    /// The watches failing now and their last error, sorted by name.
    pub(crate) fn failing(&self) -> Vec<(String, String)> {
        let mut failures = self.failures();
        failures.retain(|_, failure| failure.current());
        self.any.store(!failures.is_empty(), Ordering::Release);
        let mut failing: Vec<(String, String)> = failures
            .iter()
            .map(|(name, failure)| (name.clone(), failure.error.clone()))
            .collect();
        failing.sort();
        failing
    }

    /// Notes what watch `name` of `path` yielded: an error, or an answer of the API server,
    /// which shows it works. `Init` is no answer: the watcher yields it before each attempt
    /// to list, failing ones included.
    fn observe<K, E: Display>(&self, name: &str, path: &str, event: &Result<Event<K>, E>) {
        match event {
            Ok(Event::Init) => {}
            Ok(_) => self.recovered(name),
            Err(error) => self.failed(name, path, error),
        }
    }

    /// The `events` of watch `name` of the collection at `path`, each noted as it passes
    /// ([`WatchHealth::observe`]): a watch works again at its first answer after a failure,
    /// the end of a re-list that brought nothing to reconcile included.
    fn observed<K, E: Display, S: Stream<Item = Result<Event<K>, E>>>(
        &self,
        name: String,
        path: String,
        events: S,
    ) -> impl Stream<Item = Result<Event<K>, E>> + use<K, E, S> {
        let health = self.clone();
        events.inspect(move |event| health.observe(&name, &path, event))
    }

    /// kube-runtime's watch of `api` with `config`, retried with its default backoff, and
    /// noted here as watch `name`. Its client tells [`WatchHealth::answered`] when the API
    /// server accepts a watch of the collection (`runtime::client`).
    pub(crate) fn watch<K>(
        &self,
        name: String,
        api: Api<K>,
        config: watcher::Config,
    ) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + use<K>
    where
        K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let path = api.resource_url().to_owned();
        self.observed(name, path, watcher(api, config).default_backoff())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLAIMS: &str = "/apis/poolboy.gpte.redhat.com/v1/resourceclaims";
    const CONFIG_MAPS: &str = "/api/v1/namespaces/user/configmaps";
    const SCALINGS: &str =
        "/apis/poolboy.gpte.redhat.com/v1/namespaces/poolboy/resourcepoolscalings";

    #[test]
    fn a_watch_fails_until_it_recovers() {
        let health = WatchHealth::default();
        assert!(health.failing().is_empty());
        health.failed("ResourceClaim", CLAIMS, &"403 Forbidden");
        assert_eq!(
            health.failing(),
            [("ResourceClaim".to_owned(), "403 Forbidden".to_owned())]
        );
        health.recovered("ResourceClaim");
        assert!(health.failing().is_empty());
    }

    #[test]
    fn each_watch_recovers_on_its_own() {
        let health = WatchHealth::default();
        health.recovered("ConfigMap");
        health.failed("ResourceClaim", CLAIMS, &"403 Forbidden");
        health.failed("ConfigMap", CONFIG_MAPS, &"403 Forbidden");
        health.recovered("ResourceClaim");
        assert_eq!(
            health.failing(),
            [("ConfigMap".to_owned(), "403 Forbidden".to_owned())]
        );
        health.recovered("ConfigMap");
        assert!(health.failing().is_empty());
        health.failed("ConfigMap", CONFIG_MAPS, &"404 Not Found");
        assert_eq!(health.failing().len(), 1);
    }

    #[test]
    fn a_watch_works_again_at_its_next_answer_not_at_its_next_attempt() {
        let health = WatchHealth::default();
        let events = futures::stream::iter([
            Err("403 Forbidden"),
            Ok(Event::Init),
            Err("403 Forbidden"),
            Ok(Event::Init),
            Ok(Event::InitDone),
        ]);
        let mut events = std::pin::pin!(health.observed(
            "ResourcePoolScaling".to_owned(),
            SCALINGS.to_owned(),
            events
        ));
        let mut failing_after_next = || {
            futures::executor::block_on(events.next())
                .map(|_: Result<Event<()>, _>| health.failing().len())
        };
        // The watcher's `Init` before each list comes whether the list then fails or not.
        assert_eq!(failing_after_next(), Some(1));
        assert_eq!(failing_after_next(), Some(1));
        assert_eq!(failing_after_next(), Some(1));
        assert_eq!(failing_after_next(), Some(1));
        // A list that ends, empty or not, is the API server answering.
        assert_eq!(failing_after_next(), Some(0));
    }

    /// A watch that resumes where it was yields nothing until its collection changes: the API
    /// server accepting a request of that collection is what shows it works.
    #[test]
    fn a_watch_works_again_when_a_request_of_its_collection_is_accepted() {
        let health = WatchHealth::default();
        health.failed("ResourceClaim", CLAIMS, &"connection refused");
        health.failed("ConfigMap", CONFIG_MAPS, &"connection refused");
        health.answered(SCALINGS);
        assert_eq!(health.failing().len(), 2);
        health.answered(CLAIMS);
        assert_eq!(
            health.failing(),
            [("ConfigMap".to_owned(), "connection refused".to_owned())]
        );
    }

    #[test]
    fn a_failure_that_is_over_is_forgotten() {
        let health = WatchHealth::default();
        health.failed("ConfigMap", CONFIG_MAPS, &"connection refused");
        let long_ago = Instant::now()
            .checked_sub(FAILURE_MEMORY)
            .expect("an instant");
        health
            .failures()
            .get_mut("ConfigMap")
            .expect("its failure")
            .at = long_ago;
        assert!(health.failing().is_empty());
        assert!(health.failures().is_empty());
        assert!(!health.any.load(Ordering::Acquire));
    }
}

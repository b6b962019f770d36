//! Whether the broker's watches work: `/readyz` turns not-ready while a watch keeps
//! failing, e.g. when the broker lost its rights to list a kind or cannot reach the API
//! server, instead of reporting ready on stale stores.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use kube::runtime::watcher::Event;

/// A failure older than this, with none since, is over: a watch retries with a backoff of at
/// most 30 s, so one that keeps failing reports again well within it, and an idle watch that
/// resumed where it was (a re-list ends with an event) may have no event to show for it.
const FAILURE_MEMORY: Duration = Duration::from_secs(60);

/// The last failure of each watch that has not recovered since, by name.
#[derive(Clone, Default)]
pub(crate) struct WatchHealth {
    failures: Arc<Mutex<HashMap<String, (Instant, String)>>>,
    /// Whether `failures` holds any: every event of every watch is a recovery to note, and
    /// nearly all of them find nothing to recover from without taking the lock.
    any: Arc<AtomicBool>,
}

impl WatchHealth {
    /// The failures, whatever a panic left them as (they are only timestamps and messages).
    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, String)>> {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Watch `name` failed with `error`. The log says so when it starts failing, not at
    /// each retry.
    pub(crate) fn failed(&self, name: &str, error: &impl Display) {
        let error = error.to_string();
        let mut failures = self.failures();
        let failing = failures
            .get(name)
            .is_some_and(|(at, _)| at.elapsed() < FAILURE_MEMORY);
        if !failing {
            tracing::warn!(watch = name, %error, "watch failing: /readyz reports not ready until it works");
        }
        failures.insert(name.to_owned(), (Instant::now(), error));
        self.any.store(true, Ordering::Release);
    }

    /// Watch `name` delivered something: it works.
    pub(crate) fn recovered(&self, name: &str) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut failures = self.failures();
        if failures.remove(name).is_some() {
            tracing::info!(watch = name, "watch works again");
        }
        self.any.store(!failures.is_empty(), Ordering::Release);
    }

    /// The watches failing now and their last error, sorted by name.
    pub(crate) fn failing(&self) -> Vec<(String, String)> {
        let failures = self.failures();
        let mut failing: Vec<(String, String)> = failures
            .iter()
            .filter(|(_, (at, _))| at.elapsed() < FAILURE_MEMORY)
            .map(|(name, (_, error))| (name.clone(), error.clone()))
            .collect();
        failing.sort();
        failing
    }

    /// Notes what watch `name` yielded: an error, or an answer of the API server, which shows
    /// it works. `Init` is no answer: the watcher yields it before each attempt to list,
    /// failing ones included.
    fn observe<K, E: Display>(&self, name: &str, event: &Result<Event<K>, E>) {
        match event {
            Ok(Event::Init) => {}
            Ok(_) => self.recovered(name),
            Err(error) => self.failed(name, error),
        }
    }

    /// The `events` of watch `name`, each noted as it passes ([`WatchHealth::observe`]): a
    /// watch works again at its first answer after a failure, the end of a re-list that
    /// brought nothing to reconcile included.
    pub(crate) fn watched<K, E: Display, S: Stream<Item = Result<Event<K>, E>>>(
        &self,
        name: String,
        events: S,
    ) -> impl Stream<Item = Result<Event<K>, E>> + use<K, E, S> {
        let health = self.clone();
        events.inspect(move |event| health.observe(&name, event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_fails_until_it_recovers() {
        let health = WatchHealth::default();
        assert!(health.failing().is_empty());
        health.failed("ResourceClaim", &"403 Forbidden");
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
        health.failed("ResourceClaim", &"403 Forbidden");
        health.failed("ConfigMap", &"403 Forbidden");
        health.recovered("ResourceClaim");
        assert_eq!(
            health.failing(),
            [("ConfigMap".to_owned(), "403 Forbidden".to_owned())]
        );
        health.recovered("ConfigMap");
        assert!(health.failing().is_empty());
        health.failed("ConfigMap", &"404 Not Found");
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
        let mut events = std::pin::pin!(health.watched("ResourcePoolScaling".to_owned(), events));
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
}

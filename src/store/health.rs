//! Whether the broker's watches work: `/readyz` turns not-ready while a watch keeps
//! failing, e.g. when the broker lost its rights to list a kind or cannot reach the API
//! server, instead of reporting ready on stale stores.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A failure older than this, with none since, is over: a watch retries with a backoff of at
/// most 30 s, so one that keeps failing reports again well within it, and an idle watch that
/// recovered may have no event to show for it.
const FAILURE_MEMORY: Duration = Duration::from_secs(60);

/// The last failure of each watch that has not recovered since, by name.
#[derive(Clone, Default)]
pub(crate) struct WatchHealth {
    failures: Arc<Mutex<HashMap<String, (Instant, String)>>>,
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
    }

    /// Watch `name` delivered something: it works.
    pub(crate) fn recovered(&self, name: &str) {
        let mut failures = self.failures();
        if failures.remove(name).is_some() {
            tracing::info!(watch = name, "watch works again");
        }
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

    /// Notes what watch `name` yielded: an error, or anything else, which shows it works.
    pub(crate) fn observe<T, E: Display>(&self, name: &str, event: &Result<T, E>) {
        match event {
            Ok(_) => self.recovered(name),
            Err(error) => self.failed(name, error),
        }
    }

    /// Drives one controller's stream to its end, noting what it yields (`observe_controller`).
    pub(crate) async fn drive<T, E, Q>(
        &self,
        controller: &str,
        stream: impl futures::Stream<Item = Result<T, kube::runtime::controller::Error<E, Q>>>,
    ) where
        E: std::error::Error + 'static,
        Q: std::error::Error + 'static,
    {
        use futures::StreamExt;
        stream
            .for_each(|result| {
                self.observe_controller(controller, &result);
                async {}
            })
            .await;
    }

    /// Notes what one controller's stream yielded: a watch error (kube-runtime reports the
    /// errors of every watch feeding the controller as queue errors), or a reconcile, which
    /// shows its watches work.
    fn observe_controller<T, E: std::error::Error + 'static, Q: std::error::Error + 'static>(
        &self,
        controller: &str,
        result: &Result<T, kube::runtime::controller::Error<E, Q>>,
    ) {
        match result {
            Err(kube::runtime::controller::Error::QueueError(error)) => {
                self.failed(controller, error);
            }
            Ok(_) => self.recovered(controller),
            Err(_) => {}
        }
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
}

//! The benchmarks' recording watches: the client they read with, and how they resume after
//! an error (at once, and saying so).

use std::time::Duration;

use kube::runtime::utils::Backoff;
use kube::runtime::watcher;
use poolboy::runtime::client::with_read_timeout;

use crate::support::TestEnv;

/// A client for the recording watches of `env`'s cluster. It reads as the broker does: the
/// tests' client gives up on a response silent for 20 s, and would cut a watch whenever
/// nothing it watches changes for that long.
pub fn client(env: &TestEnv) -> kube::Client {
    kube::Client::try_from(with_read_timeout(env.kube_config())).expect("a kube client")
}

/// Resumes a watch 200 ms after each error. kube's default backoff grows to 30 s between
/// tries, and a recording watch held back that long would date what it missed by when it came
/// back, not by when it happened.
pub struct Promptly;

impl Iterator for Promptly {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_millis(200))
    }
}

impl Backoff for Promptly {
    fn reset(&mut self) {}
}

/// Says on stderr that the recording watch of `what` failed (it resumes), so that a run whose
/// figures come late shows why.
pub fn report<T>(what: &str, event: &Result<T, watcher::Error>) {
    if let Err(e) = event {
        eprintln!("the benchmark's watch of {what} failed, resuming: {e}");
    }
}

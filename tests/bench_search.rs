//! The search `make bench` runs for the highest arrival rate a system holds
//! (`benches/support/search.rs`), driven here by systems whose limit is known: each run
//! holds exactly when its rate is at most the limit.

#[path = "../benches/support/search.rs"]
mod search;

use search::{Probe, highest_held, highest_rate, next_rate};

/// The rates the search probes from `start` against a system that holds up to `limit`.
fn probed(start: f64, limit: f64) -> Vec<Probe> {
    let mut probes = Vec::new();
    while let Some(rate) = next_rate(start, &probes) {
        probes.push(Probe {
            rate,
            held: rate <= limit,
        });
    }
    probes
}

fn rates(probes: &[Probe]) -> Vec<f64> {
    probes
        .iter()
        .map(|p| (p.rate * 10.0).round() / 10.0)
        .collect()
}

#[test]
fn a_first_guess_that_holds_is_raised_until_one_does_not_then_split_once() {
    let probes = probed(40.0, 55.0);
    assert_eq!(rates(&probes), [40.0, 50.0, 62.5, 55.9]);
    assert_eq!(highest_held(&probes), 50.0);
}

#[test]
fn a_first_guess_that_does_not_hold_is_lowered_until_one_does_then_split_once() {
    let probes = probed(40.0, 28.0);
    assert_eq!(rates(&probes), [40.0, 32.0, 25.6, 28.6]);
    assert_eq!(highest_held(&probes), 25.6);
}

#[test]
fn the_search_ends_within_five_runs_however_far_the_limit() {
    let above = probed(10.0, 1000.0);
    assert_eq!(above.len(), 5);
    assert!(above.iter().all(|p| p.held));
    let below = probed(100.0, 2.0);
    assert_eq!(below.len(), 5);
    assert_eq!(highest_held(&below), 0.0);
}

#[test]
fn no_rate_below_one_a_second_is_probed() {
    let probes = probed(1.5, 0.0);
    assert_eq!(rates(&probes), [1.5, 1.2]);
    assert_eq!(highest_held(&probes), 0.0);
}

#[tokio::test]
async fn the_highest_rate_is_found_by_runs_numbered_from_zero() {
    let mut runs = Vec::new();
    let highest = highest_rate(40.0, async |attempt, rate| {
        runs.push(attempt);
        rate <= 55.0
    })
    .await;
    assert_eq!(highest, 50.0);
    assert_eq!(runs, [0, 1, 2, 3]);
}

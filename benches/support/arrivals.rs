//! Arrivals of a Poisson process: when claims come, in the sustained scenarios.

use std::time::Duration;

use rand::RngExt;

/// The instants, from the start, of arrivals at `rate` a second (exponential gaps) within
/// `window`.
pub fn poisson(rate: f64, window: Duration) -> Vec<Duration> {
    let mut rng = rand::rng();
    let mut at = Duration::ZERO;
    let mut arrivals = Vec::new();
    loop {
        let uniform: f64 = rng.random_range(f64::EPSILON..1.0);
        at += Duration::from_secs_f64(-uniform.ln() / rate);
        if at >= window {
            return arrivals;
        }
        arrivals.push(at);
    }
}

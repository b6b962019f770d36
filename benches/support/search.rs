//! The search for the highest arrival rate a system holds: a few probes, each a run at one
//! rate that either held (bind p99 within the bound) or did not.

/// Each probe above (or below) the last moves by this factor until the first one that does
/// not hold (or holds).
const STEP: f64 = 1.25;
/// A bracket this narrow (highest rate held, lowest not held) ends the search.
const CLOSE_ENOUGH: f64 = 1.13;
/// Probes at most, so that a system far from the first guess still ends.
const MAX_PROBES: usize = 5;
/// Below this a rate is not worth probing.
const MIN_RATE: f64 = 1.0;

/// One run at `rate` claims a second: whether it held.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    pub rate: f64,
    pub held: bool,
}

/// The rate to probe after `probes` (in the order run), starting from `start`; `None` once the
/// search is done. Up by [`STEP`] while every probe held, down by it while none did, then one
/// probe between the highest rate held and the lowest not held (geometric mean) when they are
/// more than [`CLOSE_ENOUGH`] apart.
pub fn next_rate(start: f64, probes: &[Probe]) -> Option<f64> {
    if probes.is_empty() {
        return Some(start);
    }
    if probes.len() >= MAX_PROBES {
        return None;
    }
    let held = probes
        .iter()
        .filter(|p| p.held)
        .map(|p| p.rate)
        .reduce(f64::max);
    let failed = probes
        .iter()
        .filter(|p| !p.held)
        .map(|p| p.rate)
        .reduce(f64::min);
    match (held, failed) {
        (Some(held), None) => Some(held * STEP),
        (None, Some(failed)) => Some(failed / STEP).filter(|rate| *rate >= MIN_RATE),
        (Some(held), Some(failed)) if failed / held > CLOSE_ENOUGH => Some((held * failed).sqrt()),
        _ => None,
    }
}

/// The highest rate of `probes` that held; 0 when none did.
pub fn highest_held(probes: &[Probe]) -> f64 {
    probes
        .iter()
        .filter(|p| p.held)
        .map(|p| p.rate)
        .fold(0.0, f64::max)
}

/// The highest rate held, from `start`: `run(attempt, rate)` makes the `attempt`-th run (from
/// 0) at `rate` claims a second and says whether it held.
pub async fn highest_rate(start: f64, mut run: impl AsyncFnMut(usize, f64) -> bool) -> f64 {
    let mut probes = Vec::new();
    while let Some(rate) = next_rate(start, &probes) {
        let held = run(probes.len(), rate).await;
        probes.push(Probe { rate, held });
    }
    highest_held(&probes)
}

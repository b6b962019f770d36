//! Demand-driven pool sizing (not in Poolboy): `spec.autoscale` keeps as
//! many unbound handles as claims are likely to bind while one handle is being provisioned.
//!
//! With binds at rate λ and a handle ready T after creation, it keeps `n + 2√n` ready, `n = λ·T`.
//! A process that has not watched a whole window yet only raises the target (docs/design.md,
//! "core::pool::autoscale").

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use chrono::{DateTime, TimeDelta, Utc};

use crate::api::pool::{PoolAutoscale, PoolAutoscaleStatus};
use crate::core::conditions::{ConditionStatus, READY, find};
use crate::core::lifespan::interval::parse_interval;
use crate::core::pool::HandleParts;

/// The window when `spec.autoscale.window` is absent.
pub(crate) const DEFAULT_WINDOW: TimeDelta = TimeDelta::hours(1);

/// The binds of a pool's handles that this process saw within the window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct BindHistory {
    /// The pool's unbound handles at the last look.
    unbound: BTreeSet<String>,
    /// When each bind was seen, oldest first.
    binds: VecDeque<DateTime<Utc>>,
    /// When this process first looked.
    since: Option<DateTime<Utc>>,
}

impl BindHistory {
    /// Records the pool's handles as they are now: `unbound` names, and whether a handle is
    /// `bound` (one that was unbound at the last look is a bind); forgets binds older than
    /// `window`.
    pub(crate) fn observe<'a>(
        &mut self,
        unbound: impl IntoIterator<Item = &'a str>,
        bound: impl Fn(&str) -> bool,
        window: TimeDelta,
        now: DateTime<Utc>,
    ) {
        self.since.get_or_insert(now);
        let newly_bound = self.unbound.iter().filter(|name| bound(name)).count();
        self.binds.extend(std::iter::repeat_n(now, newly_bound));
        self.unbound = unbound.into_iter().map(str::to_owned).collect();
        while self.binds.front().is_some_and(|t| *t + window <= now) {
            self.binds.pop_front();
        }
    }

    /// Handles `names` were made, unbound, since the last look: one bound at the next look is
    /// a bind, though no look saw it unbound. A history that has never looked (its pool has no
    /// `spec.autoscale`) keeps nothing: no look would ever replace what it kept.
    pub(crate) fn made(&mut self, names: &[String]) {
        if self.since.is_some() {
            self.unbound.extend(names.iter().cloned());
        }
    }

    /// When the target may change without any event, if it will: the oldest bind leaves the
    /// window, or the first whole window has been seen.
    pub(crate) fn next_change(
        &self,
        window: TimeDelta,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let learnt = self.since.map(|since| since + window).filter(|t| *t > now);
        let oldest = self.binds.front().map(|t| *t + window).filter(|t| *t > now);
        match (learnt, oldest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The time `handle` took from creation to readiness (its `Ready` condition's transition),
/// if it is ready.
pub(crate) fn provisioning_time<'a>(handle: impl Into<HandleParts<'a>>) -> Option<TimeDelta> {
    let handle = handle.into();
    let created = handle.metadata.creation_timestamp.as_ref()?;
    let conditions = handle.status?.conditions.as_deref()?;
    let ready = find(conditions, READY).filter(|c| c.status == ConditionStatus::True.as_str())?;
    let millis = ready.last_transition_time.0.as_millisecond() - created.0.as_millisecond();
    Some(TimeDelta::milliseconds(millis.max(0)))
}

/// The provisioning times of a pool's ready handles, kept in two sorted halves so that their
/// median is read at once as handles come and go: a pool pass reads it after every bind, and
/// sorting every handle's time each time would make a bind's cost grow with the pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProvisioningTimes {
    /// The smallest `len / 2` times, as a count per millisecond value.
    lower: Multiset,
    /// The others: the median is the least of them.
    upper: Multiset,
}

impl ProvisioningTimes {
    pub(crate) fn insert(&mut self, time: TimeDelta) {
        let millis = time.num_milliseconds();
        match self.upper.least() {
            Some(least) if millis < least => self.lower.insert(millis),
            _ => self.upper.insert(millis),
        }
        self.balance();
    }

    /// Takes away one `time` that was inserted.
    pub(crate) fn remove(&mut self, time: TimeDelta) {
        let millis = time.num_milliseconds();
        if !self.upper.remove(millis) {
            self.lower.remove(millis);
        }
        self.balance();
    }

    /// The median (the upper one of an even count), and how many times there are.
    pub(crate) fn median(&self) -> Option<(TimeDelta, usize)> {
        let median = self.upper.least()?;
        Some((
            TimeDelta::milliseconds(median),
            self.lower.len + self.upper.len,
        ))
    }

    /// Moves times between the halves until the lower one holds `len / 2` of them.
    fn balance(&mut self) {
        let half = (self.lower.len + self.upper.len) / 2;
        while self.lower.len > half {
            if let Some(greatest) = self.lower.greatest() {
                self.lower.remove(greatest);
                self.upper.insert(greatest);
            }
        }
        while self.lower.len < half {
            if let Some(least) = self.upper.least() {
                self.upper.remove(least);
                self.lower.insert(least);
            }
        }
    }
}

impl FromIterator<TimeDelta> for ProvisioningTimes {
    fn from_iter<I: IntoIterator<Item = TimeDelta>>(times: I) -> Self {
        let mut all = Self::default();
        for time in times {
            all.insert(time);
        }
        all
    }
}

/// Millisecond values with repeats.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Multiset {
    counts: BTreeMap<i64, usize>,
    len: usize,
}

impl Multiset {
    fn insert(&mut self, value: i64) {
        *self.counts.entry(value).or_insert(0) += 1;
        self.len += 1;
    }

    /// Whether `value` was there.
    fn remove(&mut self, value: i64) -> bool {
        let Some(count) = self.counts.get_mut(&value) else {
            return false;
        };
        *count -= 1;
        if *count == 0 {
            self.counts.remove(&value);
        }
        self.len -= 1;
        true
    }

    fn least(&self) -> Option<i64> {
        self.counts.keys().next().copied()
    }

    fn greatest(&self) -> Option<i64> {
        self.counts.keys().next_back().copied()
    }
}

/// What `spec.autoscale` decides for one pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AutoscaleDecision {
    pub status: PoolAutoscaleStatus,
    /// Whether unbound handles beyond the target are deleted (a whole window was seen).
    pub shrink: bool,
}

/// Why `spec.autoscale` cannot be followed: the pool's configuration problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AutoscaleError {
    #[error("spec.autoscale.window: {0}")]
    Window(String),
    #[error("spec.autoscale: min ({min}) is above max ({max})")]
    MinAboveMax { min: i64, max: i64 },
}

/// The window of `spec`.
pub(crate) fn window(spec: &PoolAutoscale) -> Result<TimeDelta, AutoscaleError> {
    match &spec.window {
        None => Ok(DEFAULT_WINDOW),
        Some(text) => parse_interval(text)
            .map_err(|e| AutoscaleError::Window(e.to_string()))
            .and_then(|w| match w > TimeDelta::zero() {
                true => Ok(w),
                false => Err(AutoscaleError::Window(format!("{text:?} is not positive"))),
            }),
    }
}

/// The unbound handles to keep, from what `history` saw and the pool's `handles` (for the
/// provisioning time); `min_available` is the pool's `minAvailable`, `previous` the target in
/// its status.
pub(crate) fn decide(
    spec: &PoolAutoscale,
    min_available: Option<i64>,
    history: &BindHistory,
    provisioning: Option<(TimeDelta, usize)>,
    previous: Option<i64>,
    now: DateTime<Utc>,
) -> Result<AutoscaleDecision, AutoscaleError> {
    let window = window(spec)?;
    let min = spec.min.or(min_available).unwrap_or(0).max(0);
    let max = spec.max;
    if min > max {
        return Err(AutoscaleError::MinAboveMax { min, max });
    }
    let learnt = history.since.is_some_and(|since| since + window <= now);
    let binds = history.binds.len();
    let (computed, mut reason) = match provisioning {
        None => (
            min,
            format!(
                "{binds} binds in the last {}; no handle of the pool has got ready yet, so \
                 provisioning time is unknown: keeping min {min}",
                format_span(window)
            ),
        ),
        Some((time, samples)) => {
            let rate = binds as f64 / window.as_seconds_f64();
            let expected = rate * time.as_seconds_f64();
            let wanted = (expected + 2.0 * expected.sqrt()).ceil();
            // Bounded by `max` before the conversion, so it cannot overflow.
            let wanted = if wanted >= max as f64 {
                max
            } else {
                wanted as i64
            };
            (
                wanted.clamp(min, max),
                format!(
                    "{binds} binds in the last {} and {} from creation to ready (median of \
                     {samples} handles): {expected:.1} claims expected while one handle is \
                     provisioned; keeping {} (min {min}, max {max})",
                    format_span(window),
                    format_span(time),
                    wanted.clamp(min, max)
                ),
            )
        }
    };
    let target = match (learnt, previous) {
        (false, Some(previous)) if previous > computed => {
            let held = previous.min(max);
            reason = format!(
                "{reason}; holding the earlier target {held} until a whole window has been seen"
            );
            held
        }
        _ => computed,
    };
    Ok(AutoscaleDecision {
        status: PoolAutoscaleStatus { target, reason },
        shrink: learnt,
    })
}

/// `1h30m`, `45s`: a span the way pool authors write them.
fn format_span(span: TimeDelta) -> String {
    let total = span.num_seconds().max(0);
    let (hours, minutes, seconds) = (total / 3600, total / 60 % 60, total % 60);
    let mut text = String::new();
    if hours > 0 {
        text.push_str(&format!("{hours}h"));
    }
    if minutes > 0 {
        text.push_str(&format!("{minutes}m"));
    }
    if seconds > 0 || text.is_empty() {
        text.push_str(&format!("{seconds}s"));
    }
    text
}

#[cfg(test)]
mod tests;

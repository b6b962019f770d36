//! What renders made of the clock: the earliest instant at which a comparison with
//! the current time changes its outcome, or that a result depends on the clock in a way no
//! instant can be derived from.
//!
//! Nothing is polled: every date or timedelta a template computes knows its *rate* against the
//! clock, so the instant a comparison of two of them flips is known exactly; any other use of a
//! value that moves makes the result *unpredictable*, and the caller re-renders it at a fallback
//! interval (docs/design.md, "core::template::clock").

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, NaiveDateTime, TimeDelta, Utc};

/// What the renders a [`ClockWatch`] saw made of the clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ClockReading {
    /// The earliest instant, after the render's now, at which a comparison with the clock changes
    /// its outcome; `None` when none does.
    pub(crate) next_flip: Option<DateTime<Utc>>,
    /// A result depends on the clock in a way no instant can be derived from (for example, it
    /// prints the current time).
    pub(crate) unpredictable: bool,
}

impl ClockReading {
    /// Both readings together: the earlier flip, unpredictable when either is.
    pub(crate) fn merge(self, other: ClockReading) -> ClockReading {
        ClockReading {
            next_flip: match (self.next_flip, other.next_flip) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            unpredictable: self.unpredictable || other.unpredictable,
        }
    }

    /// When the results should be rendered again: at the next flip, or one `fallback` interval
    /// after `now` when they are unpredictable, whichever comes first; `None` when nothing the
    /// clock does can change them.
    pub(crate) fn next_render(
        &self,
        now: DateTime<Utc>,
        fallback: std::time::Duration,
    ) -> Option<DateTime<Utc>> {
        let fallback = self
            .unpredictable
            .then(|| TimeDelta::from_std(fallback).ok())
            .flatten()
            .and_then(|interval| now.checked_add_signed(interval));
        match (self.next_flip, fallback) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The instant an object's templates last read the clock, from which inputs, and when they
/// asked to be rendered again.
///
/// A pass before that re-render, over the same inputs, renders at the same instant again.
/// The object's own writes wake it (a status write, the echo of a resource it updated); a
/// result that prints the clock, rendered again by such a pass a second later, changed and
/// was written again, more often than the interval it is refreshed at. Comparisons lose
/// nothing: none of those rendered at the pinned instant flips before the re-render, and one
/// a new input brings that has flipped since asks for a re-render already due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClockPin<I> {
    /// What the templates were rendered from; new inputs are rendered at the clock's time.
    inputs: I,
    at: DateTime<Utc>,
    until: DateTime<Utc>,
}

impl<I: PartialEq> ClockPin<I> {
    /// Templates rendered from `inputs` at `at` that ask to be rendered again at `until`.
    pub(crate) fn new(inputs: I, at: DateTime<Utc>, until: DateTime<Utc>) -> Self {
        Self { inputs, at, until }
    }

    /// The instant a pass over `inputs` at `now` renders at: the pinned one while it holds,
    /// else `now`.
    pub(crate) fn render_at(pin: Option<&Self>, inputs: &I, now: DateTime<Utc>) -> DateTime<Utc> {
        match pin {
            Some(pin) if pin.inputs == *inputs && now < pin.until => pin.at,
            _ => now,
        }
    }
}

/// Collects what the renders of one engine handle (one reconcile pass) make of the clock.
#[derive(Debug, Default)]
pub(crate) struct ClockWatch {
    reading: Mutex<ClockReading>,
}

impl ClockWatch {
    pub(crate) fn reading(&self) -> ClockReading {
        *self.reading.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn absorb(&self, other: ClockReading) {
        self.update(|reading| *reading = reading.merge(other));
    }

    fn update(&self, change: impl FnOnce(&mut ClockReading)) {
        change(&mut self.reading.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// The clock as one render sees it: its pinned now, and where to record what it made of it.
#[derive(Debug)]
pub(super) struct RenderClock {
    pub(super) now: DateTime<Utc>,
    watch: Option<Arc<ClockWatch>>,
}

impl RenderClock {
    pub(super) fn new(now: DateTime<Utc>, watch: Option<Arc<ClockWatch>>) -> Arc<RenderClock> {
        Arc::new(RenderClock { now, watch })
    }

    pub(super) fn now_naive(&self) -> NaiveDateTime {
        self.now.naive_utc()
    }

    /// A result used a value that moves with the clock in a way no instant can be derived from.
    pub(super) fn unpredictable(&self) {
        if let Some(watch) = &self.watch {
            watch.update(|reading| reading.unpredictable = true);
        }
    }

    /// Two values were compared whose difference is `difference` now and changes by `rate`
    /// per unit of clock time: records the instant at which it crosses zero, when that is
    /// still to come. At the crossing the values are equal; right after it the order is
    /// reversed, so a zero difference now records the next microsecond.
    pub(super) fn compared(&self, difference: TimeDelta, rate: i64) {
        let Some(watch) = &self.watch else {
            return;
        };
        if rate == 0 {
            return;
        }
        match crossing(difference, rate).and_then(|after| self.now.checked_add_signed(after)) {
            Some(at) => watch.update(|reading| {
                reading.next_flip = Some(reading.next_flip.map_or(at, |known| known.min(at)));
            }),
            // Too far away to represent: as good as never, but say so rather than guess.
            None if crosses_later(difference, rate) => {
                watch.update(|reading| reading.unpredictable = true)
            }
            None => {}
        }
    }
}

/// How long after now `difference + rate × elapsed` reaches zero, rounded up to the
/// microsecond (and at least one microsecond: a zero difference changes right away); `None`
/// when it never does from now on.
fn crossing(difference: TimeDelta, rate: i64) -> Option<TimeDelta> {
    if !crosses_later(difference, rate) {
        return None;
    }
    let micros = i128::from(difference.num_microseconds()?).abs();
    let rate = i128::from(rate).abs();
    let after = (micros + rate - 1) / rate;
    Some(TimeDelta::microseconds(i64::try_from(after.max(1)).ok()?))
}

/// Whether `difference + rate × elapsed` is zero now or reaches zero later.
fn crosses_later(difference: TimeDelta, rate: i64) -> bool {
    rate != 0 && (difference.is_zero() || (difference < TimeDelta::zero()) == (rate > 0))
}

#[cfg(test)]
mod tests;

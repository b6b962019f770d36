//! How long a claim waiting on a pool will probably wait (not in Poolboy), from what the broker
//! knows: the pool's median time from a handle's creation to its readiness, the claim's place
//! in the pool's line, and the pool's free handles (ready, or being provisioned). The message
//! names instants, not "in N minutes", so that it changes only when the estimate does: a
//! claim's status is not rewritten as the clock moves.

use chrono::{DateTime, TimeDelta, Utc};

use crate::api::ResourceHandle;
use crate::api::claim::ClaimWaitEstimate;
use crate::core::lifespan::{format_timestamp, instant_of};
use crate::core::pool::autoscale::provisioning_time;

/// A free handle of the pool, as the estimate reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FreeHandle {
    pub(crate) created: DateTime<Utc>,
    pub(crate) ready: bool,
}

impl FreeHandle {
    /// `handle` as the estimate reads it: when it was made, and whether it got ready (its
    /// `Ready` condition is True); `None` without a creation time.
    pub(crate) fn of(handle: &ResourceHandle) -> Option<Self> {
        Some(Self {
            created: instant_of(handle.metadata.creation_timestamp.as_ref()?)?,
            ready: provisioning_time(handle).is_some(),
        })
    }
}

/// What the estimate of a claim waiting for a pool's handle is made from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PoolWait<'a> {
    pub(crate) pool: &'a str,
    /// The median time from creation to readiness of the pool's handles that got ready.
    pub(crate) handle_ready: TimeDelta,
    /// The claim's place among the claims waiting for the pool, from 1; `None` when no handle
    /// is free for anyone (the pool is at its cap).
    pub(crate) position: Option<usize>,
    pub(crate) free: &'a [FreeHandle],
}

/// A claim waiting for `wait.pool`: the free handles go to the claims in line in turn, each
/// taking the free handle that is ready first (a ready one at once, one being provisioned at
/// its creation plus the median). The estimate, and what the `Ready` message says of it.
pub(crate) fn waiting(wait: &PoolWait<'_>, now: DateTime<Utc>) -> (ClaimWaitEstimate, String) {
    let handle_ready = rounded(wait.handle_ready);
    // Each free handle, expected ready at its creation plus the median (ready ones first):
    // the instant stays put from pass to pass, for a ready handle too.
    let mut turns: Vec<(bool, DateTime<Utc>)> = wait
        .free
        .iter()
        .map(|h| (!h.ready, h.created + handle_ready))
        .collect();
    turns.sort();
    let turn = wait
        .position
        .and_then(|position| turns.get(position.checked_sub(1)?).copied());
    let place = match wait.position {
        Some(position) => format!("{} in line for pool {}", ordinal(position), wait.pool),
        None => format!("waiting for a handle of pool {} to be freed", wait.pool),
    };
    let estimate = ClaimWaitEstimate {
        pool: wait.pool.to_owned(),
        handle_ready_seconds: handle_ready.num_seconds(),
        position: wait.position.and_then(|p| i64::try_from(p).ok()),
        expected_ready: turn.map(|(_, at)| format_timestamp(at)),
    };
    let takes = format!("a handle takes {} to be ready", about(handle_ready));
    let message = match turn {
        None => format!("{place}; {takes}"),
        Some((false, _)) => format!("{place}; a ready handle is free for it"),
        Some((true, at)) => format!("{place}; {takes}: {}", expected(at, now)),
    };
    (estimate, message)
}

/// A bound claim whose handle of `pool`, made at `created`, is not ready yet.
pub(crate) fn provisioning(
    pool: &str,
    handle_ready: TimeDelta,
    created: DateTime<Utc>,
    now: DateTime<Utc>,
) -> (ClaimWaitEstimate, String) {
    let handle_ready = rounded(handle_ready);
    let at = created + handle_ready;
    let estimate = ClaimWaitEstimate {
        pool: pool.to_owned(),
        handle_ready_seconds: handle_ready.num_seconds(),
        position: None,
        expected_ready: Some(format_timestamp(at)),
    };
    let message = format!(
        "a handle of pool {pool} takes {} to be ready: {}",
        about(handle_ready),
        expected(at, now)
    );
    (estimate, message)
}

/// "expected by <instant>", or, once that passed, "expected any moment": either stays put
/// between passes.
fn expected(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    match at > now {
        true => format!("expected by {}", format_timestamp(at)),
        false => "expected any moment".to_owned(),
    }
}

/// `duration` at the precision [`about`] says it in, so that a median moving by a few seconds
/// changes neither the message nor the status.
fn rounded(duration: TimeDelta) -> TimeDelta {
    let seconds = duration.num_seconds().max(0);
    TimeDelta::seconds(match seconds {
        ..90 => seconds,
        90..5400 => (seconds + 30) / 60 * 60,
        _ => (seconds + 1800) / 3600 * 3600,
    })
}

/// A duration as people say it: "about 40 s", "about 24 min", "about 3 h"; "moments" under a
/// second.
fn about(duration: TimeDelta) -> String {
    let seconds = duration.num_seconds();
    match seconds {
        ..=0 => "moments".to_owned(),
        1..90 => format!("about {seconds} s"),
        90..5400 => format!("about {} min", (seconds + 30) / 60),
        _ => format!("about {} h", (seconds + 1800) / 3600),
    }
}

/// "1st", "2nd", "3rd", "4th", … "11th", "12th", "13th", "21st".
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minutes: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_795_000_000, 0).expect("an instant")
            + TimeDelta::minutes(minutes)
    }

    fn free(created: i64, ready: bool) -> FreeHandle {
        FreeHandle {
            created: at(created),
            ready,
        }
    }

    /// One handle is ready, three are provisioning (24 min each), made 20 and 10 minutes ago
    /// and now: the third in line gets the one made 10 minutes ago.
    #[test]
    fn the_third_in_line_takes_the_third_handle_to_be_ready() {
        let handles = [
            free(-20, false),
            free(-60, true),
            free(0, false),
            free(-10, false),
        ];
        let wait = PoolWait {
            pool: "lab",
            handle_ready: TimeDelta::minutes(24),
            position: Some(3),
            free: &handles,
        };
        let (estimate, message) = waiting(&wait, at(0));
        let expected = format_timestamp(at(14));
        assert_eq!(
            message,
            format!(
                "3rd in line for pool lab; a handle takes about 24 min to be ready: expected by \
                 {expected}"
            )
        );
        assert_eq!(estimate.position, Some(3));
        assert_eq!(estimate.handle_ready_seconds, 1440);
        assert_eq!(estimate.expected_ready, Some(expected));
        // The same a minute later: nothing to write.
        assert_eq!(waiting(&wait, at(1)).1, message);
        let first = PoolWait {
            position: Some(1),
            ..wait.clone()
        };
        let (estimate, message) = waiting(&first, at(0));
        assert!(
            message.ends_with("a ready handle is free for it"),
            "{message}"
        );
        // The ready one was made an hour ago: ready since.
        assert_eq!(estimate.expected_ready, Some(format_timestamp(at(-36))));
    }

    /// Past the free handles, and at the pool's cap, the wait is for a handle to be freed:
    /// only the provisioning time is told.
    #[test]
    fn a_wait_for_a_freed_handle_tells_the_provisioning_time_only() {
        let handles = [free(-5, false)];
        let beyond = PoolWait {
            pool: "lab",
            handle_ready: TimeDelta::seconds(40),
            position: Some(2),
            free: &handles,
        };
        let (estimate, message) = waiting(&beyond, at(0));
        assert_eq!(
            message,
            "2nd in line for pool lab; a handle takes about 40 s to be ready"
        );
        assert_eq!(estimate.expected_ready, None);
        let capped = PoolWait {
            position: None,
            free: &[],
            ..beyond
        };
        let (estimate, message) = waiting(&capped, at(0));
        assert_eq!(
            message,
            "waiting for a handle of pool lab to be freed; a handle takes about 40 s to be ready"
        );
        assert_eq!(
            (estimate.handle_ready_seconds, estimate.position),
            (40, None)
        );
    }

    #[test]
    fn a_provisioning_handle_is_expected_at_its_creation_plus_the_median() {
        let (estimate, message) = provisioning("lab", TimeDelta::minutes(24), at(-4), at(0));
        let expected = format_timestamp(at(20));
        assert_eq!(
            message,
            format!("a handle of pool lab takes about 24 min to be ready: expected by {expected}")
        );
        assert_eq!(estimate.expected_ready, Some(expected));
        let (_, late) = provisioning("lab", TimeDelta::minutes(24), at(-30), at(0));
        assert!(late.ends_with("expected any moment"), "{late}");
    }

    /// A median that moves by seconds changes neither the message nor the status.
    #[test]
    fn the_median_is_kept_at_the_precision_it_is_told_in() {
        let wait = |minutes: i64, seconds: i64| PoolWait {
            pool: "lab",
            handle_ready: TimeDelta::minutes(minutes) + TimeDelta::seconds(seconds),
            position: None,
            free: &[],
        };
        assert_eq!(waiting(&wait(24, 3), at(0)), waiting(&wait(23, 50), at(0)));
        assert_eq!(waiting(&wait(24, 3), at(0)).0.handle_ready_seconds, 1440);
        assert_eq!(
            waiting(&wait(0, 0), at(0)).1,
            "waiting for a handle of pool lab to be freed; a handle takes moments to be ready"
        );
    }

    #[test]
    fn durations_and_places_read_as_people_say_them() {
        assert_eq!(about(TimeDelta::seconds(89)), "about 89 s");
        assert_eq!(about(TimeDelta::seconds(90)), "about 2 min");
        assert_eq!(about(TimeDelta::minutes(95)), "about 2 h");
        let places: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal).into();
        assert_eq!(
            places,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"
            ]
        );
    }
}

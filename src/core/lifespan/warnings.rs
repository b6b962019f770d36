//! Expiry warnings (not in Poolboy): a claim whose lifespan ends within one of the configured
//! lead times (`poolboy run --lifespan-warnings`, 24 h and 1 h by default) says so in a
//! `LifespanEnding` condition, and hears it in an Event, once per lead time crossed while it
//! lived; the claim controller looks again at the next crossing.

use chrono::{DateTime, TimeDelta, Utc};

use super::format_timestamp;
use super::interval::format_interval;
use crate::core::conditions::ConditionStatus;

/// The claim's `LifespanEnding` condition, and when it changes next by the clock alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LifespanEnding {
    pub status: ConditionStatus,
    pub reason: &'static str,
    pub message: String,
    /// The next instant a lead time is crossed.
    pub next_crossing: Option<DateTime<Utc>>,
}

/// The condition for a lifespan that started at `start` and ends at `end` (none without an
/// end), given the `leads`; `None` when no lead time is configured (warnings off). A lead
/// time longer than the whole lifespan was crossed before the claim lived: no news, so it is
/// left out (a 2 h claim hears "in less than 1h", never "in less than 1d").
pub(crate) fn lifespan_ending(
    start: Option<DateTime<Utc>>,
    end: Option<DateTime<Utc>>,
    leads: &[TimeDelta],
    now: DateTime<Utc>,
) -> Option<LifespanEnding> {
    if leads.is_empty() {
        return None;
    }
    let Some(end) = end else {
        return Some(LifespanEnding {
            status: ConditionStatus::False,
            reason: "NoEnd",
            message: "the lifespan has no end".to_owned(),
            next_crossing: None,
        });
    };
    let lived_through = |lead: &&TimeDelta| start.is_none_or(|start| end - **lead >= start);
    let leads: Vec<&TimeDelta> = leads.iter().filter(lived_through).collect();
    let remaining = end - now;
    // The tightest lead time crossed: "in less than 1h" once within the hour.
    let crossed = leads.iter().filter(|lead| remaining <= ***lead).min();
    let next_crossing = leads
        .iter()
        .map(|lead| end - **lead)
        .filter(|at| *at > now)
        .min();
    let end_text = format_timestamp(end);
    Some(match crossed {
        Some(lead) => LifespanEnding {
            status: ConditionStatus::True,
            reason: "EndsSoon",
            message: format!(
                "the lifespan ends at {end_text}, in less than {}",
                format_interval(**lead)
            ),
            next_crossing,
        },
        None => LifespanEnding {
            status: ConditionStatus::False,
            reason: "EndsLater",
            message: format!("the lifespan ends at {end_text}"),
            next_crossing,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::test_fixtures::{at, now};

    #[test]
    fn each_lead_time_crossed_is_said_once_and_the_next_crossing_is_known() {
        let leads = [TimeDelta::hours(24), TimeDelta::hours(1)];
        let end = at("2026-11-25T12:00:00Z");
        let far = lifespan_ending(None, Some(end), &leads, at("2026-11-23T12:00:00Z")).expect("on");
        assert_eq!(
            (far.status, far.reason),
            (ConditionStatus::False, "EndsLater")
        );
        assert_eq!(far.next_crossing, Some(at("2026-11-24T12:00:00Z")));
        let day = lifespan_ending(None, Some(end), &leads, at("2026-11-24T12:00:00Z")).expect("on");
        assert_eq!(
            (day.status, day.message.as_str()),
            (
                ConditionStatus::True,
                "the lifespan ends at 2026-11-25T12:00:00Z, in less than 1d"
            )
        );
        assert_eq!(day.next_crossing, Some(at("2026-11-25T11:00:00Z")));
        // Still within the day: the same message, so no new Event.
        let later =
            lifespan_ending(None, Some(end), &leads, at("2026-11-24T18:00:00Z")).expect("on");
        assert_eq!(later.message, day.message);
        let hour =
            lifespan_ending(None, Some(end), &leads, at("2026-11-25T11:30:00Z")).expect("on");
        assert!(
            hour.message.ends_with("in less than 1h"),
            "{}",
            hour.message
        );
        assert_eq!(hour.next_crossing, None);
        // No end, or warnings off.
        assert_eq!(
            lifespan_ending(None, None, &leads, now()).map(|e| e.reason),
            Some("NoEnd")
        );
        assert_eq!(lifespan_ending(None, Some(end), &[], now()), None);
    }

    #[test]
    fn a_lead_time_longer_than_the_lifespan_is_no_news() {
        let leads = [TimeDelta::hours(24), TimeDelta::hours(1)];
        let start = at("2026-11-25T10:00:00Z");
        let end = at("2026-11-25T12:00:00Z");
        let fresh = lifespan_ending(Some(start), Some(end), &leads, start).expect("on");
        assert_eq!(
            (fresh.status, fresh.message.as_str()),
            (
                ConditionStatus::False,
                "the lifespan ends at 2026-11-25T12:00:00Z"
            )
        );
        assert_eq!(fresh.next_crossing, Some(at("2026-11-25T11:00:00Z")));
        let hour = lifespan_ending(Some(start), Some(end), &leads, at("2026-11-25T11:00:00Z"));
        assert!(
            hour.expect("on").message.ends_with("in less than 1h"),
            "the hour's crossing happened while it lived"
        );
    }
}

//! `status.conditions`, one rule for every kind that has them (claim, handle, pool, scaling,
//! provider). As `metav1.Condition` defines it, `lastTransitionTime` is "the last time the
//! condition transitioned from one status to another": it moves only when the status flips,
//! to the `now` the caller passes; a new reason, message or observedGeneration is written in
//! place and keeps it.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::core::lifespan::api_time;

#[cfg(test)]
mod tests;

/// Every kind: whether the object's own input is usable (the claim's providers resolve and its
/// values validate, the handle's definitions render, the pool's or scaling's configuration
/// holds, the provider compiles).
pub(crate) const VALID: &str = "Valid";
/// A handle: whether every resource is ready.
pub(crate) const READY: &str = "Ready";
/// A claim: whether it is bound to a handle.
pub(crate) const BOUND: &str = "Bound";
/// A claim: whether its lifespan ends within a configured lead time.
pub(crate) const LIFESPAN_ENDING: &str = "LifespanEnding";

/// A condition's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }
}

/// A condition as a rule wants it; [`set_condition`] gives it its transition time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DesiredCondition {
    pub type_: &'static str,
    pub status: ConditionStatus,
    pub reason: &'static str,
    pub message: String,
    pub observed_generation: Option<i64>,
}

/// What [`set_condition`] changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// The condition was already as desired.
    Unchanged,
    /// Same status and message; the reason or observedGeneration moved.
    Refreshed,
    /// Same status, another message.
    Reworded,
    /// A new condition, or its status flipped: `lastTransitionTime` is `now`.
    Transitioned,
}

impl Change {
    /// Whether a reader of the old condition learns something (a new status or message): what
    /// earns a Warning Event when the condition reports a problem.
    pub(crate) fn is_news(self) -> bool {
        matches!(self, Change::Reworded | Change::Transitioned)
    }
}

/// Sets `desired` in `conditions`, replacing the condition of its type or appending it.
pub(crate) fn set_condition(
    conditions: &mut Vec<Condition>,
    desired: DesiredCondition,
    now: DateTime<Utc>,
) -> Change {
    let status = desired.status.as_str();
    let existing = conditions.iter_mut().find(|c| c.type_ == desired.type_);
    let change = match &existing {
        None => Change::Transitioned,
        Some(c) if c.status != status => Change::Transitioned,
        Some(c) if c.message != desired.message => Change::Reworded,
        Some(c)
            if c.reason != desired.reason
                || c.observed_generation != desired.observed_generation =>
        {
            Change::Refreshed
        }
        Some(_) => Change::Unchanged,
    };
    let last_transition_time = match &existing {
        Some(c) if change != Change::Transitioned => c.last_transition_time.clone(),
        _ => api_time(now),
    };
    let condition = Condition {
        type_: desired.type_.to_owned(),
        status: status.to_owned(),
        reason: desired.reason.to_owned(),
        message: desired.message,
        observed_generation: desired.observed_generation,
        last_transition_time,
    };
    match existing {
        Some(slot) => *slot = condition,
        None => conditions.push(condition),
    }
    change
}

/// The `Valid` condition of a pool or a scaling, kinds whose status Poolboy writes without
/// conditions: absent while there never was a problem (the status stays as Poolboy writes
/// it), False with the problem, True once the problem is gone.
pub(crate) fn set_configuration_validity(
    conditions: &mut Vec<Condition>,
    problem: Option<&str>,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Change {
    let desired = match problem {
        None if find(conditions, VALID).is_none() => return Change::Unchanged,
        None => DesiredCondition {
            type_: VALID,
            status: ConditionStatus::True,
            reason: "Valid",
            message: String::new(),
            observed_generation: generation,
        },
        Some(problem) => DesiredCondition {
            type_: VALID,
            status: ConditionStatus::False,
            reason: "InvalidConfiguration",
            message: problem.to_owned(),
            observed_generation: generation,
        },
    };
    set_condition(conditions, desired, now)
}

/// The reason of the `Valid` condition of an object the broker cannot decode.
pub(crate) const UNDECODABLE: &str = "Undecodable";

/// An object the broker cannot decode (nested too deep, a field of the wrong type)
/// is set aside, and says so in `Valid`; once fixed, its controller sets `Valid` again.
pub(crate) fn set_undecodable(
    conditions: &mut Vec<Condition>,
    problem: &str,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Change {
    let desired = DesiredCondition {
        type_: VALID,
        status: ConditionStatus::False,
        reason: UNDECODABLE,
        message: problem.to_owned(),
        observed_generation: generation,
    };
    set_condition(conditions, desired, now)
}

/// The condition of type `type_`.
pub(crate) fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The problem condition `type_` reports: its message when it is False.
pub(crate) fn problem<'a>(conditions: Option<&'a [Condition]>, type_: &str) -> Option<&'a str> {
    find(conditions?, type_)
        .filter(|c| c.status == ConditionStatus::False.as_str())
        .map(|c| c.message.as_str())
}

/// Condition `type_` of `after` when it says something `before` did not (another status,
/// reason or message): what earns an Event from the writer that made the change.
pub(crate) fn news<'a>(
    before: Option<&[Condition]>,
    after: Option<&'a [Condition]>,
    type_: &str,
) -> Option<&'a Condition> {
    let said = |c: &Condition| (c.status.clone(), c.reason.clone(), c.message.clone());
    let old = before.and_then(|c| find(c, type_)).map(said);
    after
        .and_then(|c| find(c, type_))
        .filter(|new| old != Some(said(new)))
}

/// Whether condition `type_` is True in `after` and was not in `before`: a milestone that
/// earns a Normal Event from the writer that made it so.
pub(crate) fn became_true(
    before: Option<&[Condition]>,
    after: Option<&[Condition]>,
    type_: &str,
) -> bool {
    let is_true = |conditions: Option<&[Condition]>| {
        conditions
            .and_then(|c| find(c, type_))
            .is_some_and(|c| c.status == ConditionStatus::True.as_str())
    };
    is_true(after) && !is_true(before)
}

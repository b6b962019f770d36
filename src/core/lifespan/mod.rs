//! Lifespan rules (Poolboy 1.12 §10, §7.2, §7.4; 1.17 Δ§3.1.1, Δ§3.2): when a handle and its
//! claim end, how a requested end is bounded, and when a controller must look again.
//!
//! Intervals are evaluated by the caller ([`EvaluatedInterval`], [`TimeDelta`]); every instant
//! computed here is truncated to whole seconds, as Poolboy writes them, and every deadline is
//! returned as an instant ([`Expiry::At`], [`StartGate::OpensAt`]) so that a controller can
//! requeue exactly then (docs/design.md, "core::lifespan").

use std::time::Duration;

use chrono::{DateTime, Datelike, SubsecRound, TimeDelta, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::claim::ClaimStatusLifespan;
use crate::api::handle::HandleLifespan;
use crate::api::refs::LifespanSettings;
use crate::api::{ResourceClaim, ResourceHandle};
use interval::{format_interval, format_simple_interval};

#[cfg(test)]
mod tests;

pub(crate) mod interval;
pub(crate) mod values;
pub(crate) mod warnings;

/// How Poolboy writes timestamps (Python `%FT%TZ`): UTC, whole seconds.
pub(crate) const TIMESTAMP_FORMAT: &str = "%Y-%m-%dT%H:%M:%SZ";

/// The latest year a `%FT%TZ` timestamp can carry.
const LAST_WRITABLE_YEAR: i32 = 9999;

/// Errors of the lifespan rules: bad timestamps or intervals in an object, or an end too far
/// away to be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LifespanError {
    #[error(
        "{field}: {value:?} is not an RFC 3339 timestamp such as 2025-01-31T12:00:00Z ({reason})"
    )]
    InvalidTimestamp {
        field: &'static str,
        value: String,
        reason: String,
    },
    #[error("{field}: {value:?} is not a valid time interval such as 30m or 1d: {reason}")]
    InvalidInterval {
        field: &'static str,
        value: String,
        reason: String,
    },
    #[error(
        "{field}: {interval} seconds after {base} is past the year 9999; use a shorter interval"
    )]
    OutOfRange {
        field: &'static str,
        base: String,
        interval: i64,
    },
}

/// Parses an RFC 3339 timestamp from `field` (named in the error, e.g.
/// `"ResourceClaim spec.lifespan.end"`). Any offset is accepted and converted to UTC.
pub(crate) fn parse_timestamp(
    field: &'static str,
    value: &str,
) -> Result<DateTime<Utc>, LifespanError> {
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| LifespanError::InvalidTimestamp {
            field,
            value: value.to_owned(),
            reason: e.to_string(),
        })
}

/// Writes a timestamp as Poolboy does: `2025-01-31T12:00:00Z` (sub-seconds dropped).
pub(crate) fn format_timestamp(t: DateTime<Utc>) -> String {
    t.format(TIMESTAMP_FORMAT).to_string()
}

/// A `metav1.Time` in whole seconds, as the API server stores it, so that a written time
/// reads back equal.
pub(crate) fn api_time(t: DateTime<Utc>) -> Time {
    Time(
        k8s_openapi::jiff::Timestamp::from_second(t.timestamp())
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

/// A `metav1.Time` as an instant; `None` past chrono's range.
pub(crate) fn instant_of(t: &Time) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_micros(t.0.as_microsecond())
}

/// Seconds from `t` to `now` (never negative). `metav1.Time` is stored in whole seconds, so an
/// age measured from a `creationTimestamp` may be up to a second longer than the truth.
pub(crate) fn seconds_since(t: &Time, now: DateTime<Utc>) -> f64 {
    let now = now.timestamp_micros() as f64 / 1e6;
    let then = t.0.as_microsecond() as f64 / 1e6;
    (now - then).max(0.0)
}

/// How long from `now` until `deadline`; zero when it has passed. For requeueing.
pub(crate) fn delay_until(deadline: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (deadline - now).to_std().unwrap_or(Duration::ZERO)
}

/// One lifespan interval: its `text` as Poolboy stores it and its `value` evaluated for the
/// claim at hand. Which text is meant depends on the rule (see each function).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EvaluatedInterval {
    pub text: String,
    pub value: TimeDelta,
}

impl EvaluatedInterval {
    pub(crate) fn new(text: impl Into<String>, value: TimeDelta) -> Self {
        Self {
            text: text.into(),
            value,
        }
    }
}

/// A provider's or handle's `default`, `maximum` and `relativeMaximum`, evaluated for one claim
/// (an empty render is `None`). A value of zero or less sets no limit: Poolboy tests the
/// timedelta's truthiness, and a non-positive lifespan has no meaning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EvaluatedLifespan {
    pub default: Option<EvaluatedInterval>,
    pub maximum: Option<EvaluatedInterval>,
    pub relative_maximum: Option<EvaluatedInterval>,
}

impl EvaluatedLifespan {
    /// The values alone.
    pub(crate) fn limits(&self) -> LifespanLimits {
        let value = |i: &Option<EvaluatedInterval>| i.as_ref().map(|i| i.value);
        LifespanLimits {
            default: value(&self.default),
            maximum: value(&self.maximum),
            relative_maximum: value(&self.relative_maximum),
        }
        .effective()
    }

    /// The per-field minimum across providers (Poolboy 1.12 §10.5): the smallest set value
    /// wins, independently for each field, the first provider on ties.
    fn tightest<'a>(lifespans: impl IntoIterator<Item = &'a EvaluatedLifespan>) -> Self {
        fn keep_smaller(
            best: &mut Option<EvaluatedInterval>,
            candidate: &Option<EvaluatedInterval>,
        ) {
            if let Some(candidate) = candidate.as_ref().filter(|c| c.value > TimeDelta::zero())
                && best.as_ref().is_none_or(|b| candidate.value < b.value)
            {
                *best = Some(candidate.clone());
            }
        }
        let mut tightest = Self::default();
        for lifespan in lifespans {
            keep_smaller(&mut tightest.default, &lifespan.default);
            keep_smaller(&mut tightest.maximum, &lifespan.maximum);
            keep_smaller(&mut tightest.relative_maximum, &lifespan.relative_maximum);
        }
        tightest
    }
}

/// Lifespan values (Poolboy 1.12 §10.3): `default` is the lifespan a claim gets,
/// `maximum` the longest it may have from its start (or first ready), `relative_maximum` the
/// furthest an end may be from now. Zero or negative values are ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LifespanLimits {
    pub default: Option<TimeDelta>,
    pub maximum: Option<TimeDelta>,
    pub relative_maximum: Option<TimeDelta>,
}

impl LifespanLimits {
    fn effective(self) -> Self {
        let positive = |d: Option<TimeDelta>| d.filter(|d| *d > TimeDelta::zero());
        Self {
            default: positive(self.default),
            maximum: positive(self.maximum),
            relative_maximum: positive(self.relative_maximum),
        }
    }
}

/// Which limit an effective maximum end comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaximumBound {
    /// `anchor + maximum`: fixed once the claim is ready.
    Maximum,
    /// `now + relativeMaximum`: moves with the clock.
    RelativeMaximum,
}

/// The latest end a claim may have right now (Poolboy 1.12 §10.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MaximumEnd {
    pub at: DateTime<Utc>,
    pub bound: MaximumBound,
}

/// The effective maximum end (Poolboy 1.12 §10.4): the earlier of `anchor + maximum` and
/// `now + relativeMaximum`, whichever are set (`maximum` on a tie). The anchor of a claim is its
/// first-ready time, else its lifespan start; a handle being created or bound is anchored now.
pub(crate) fn effective_maximum_end(
    limits: &LifespanLimits,
    anchor: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Option<MaximumEnd>, LifespanError> {
    let limits = limits.effective();
    let maximum = limits
        .maximum
        .map(|m| later(anchor, m, "spec.lifespan.maximum"))
        .transpose()?;
    let relative = limits
        .relative_maximum
        .map(|r| later(now, r, "spec.lifespan.relativeMaximum"))
        .transpose()?;
    Ok(match (maximum, relative) {
        (Some(m), Some(r)) if r < m => Some(MaximumEnd {
            at: r,
            bound: MaximumBound::RelativeMaximum,
        }),
        (Some(m), _) => Some(MaximumEnd {
            at: m,
            bound: MaximumBound::Maximum,
        }),
        (None, Some(r)) => Some(MaximumEnd {
            at: r,
            bound: MaximumBound::RelativeMaximum,
        }),
        (None, None) => None,
    })
}

/// A handle end after the maximums were applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClampedEnd {
    /// The handle's `spec.lifespan.end`.
    pub end: DateTime<Utc>,
    /// Also write `end` to the claim's `spec.lifespan.end`: the request exceeded
    /// relativeMaximum. Without this, the next pass would clamp the same request to a later
    /// `now + relativeMaximum`, and the end would slide forward for ever (Poolboy 1.12 §10.4, §16).
    pub rewrite_request: bool,
}

/// §7 step 11: the handle end for the claim's requested end (`spec.lifespan.end`), clamped to
/// the effective maximum anchored at the claim's first-ready time, else its lifespan start.
/// `None` when the claim requests no end (the handle keeps its own).
pub(crate) fn clamp_requested_end(
    claim: &ResourceClaim,
    limits: &LifespanLimits,
    now: DateTime<Utc>,
) -> Result<Option<ClampedEnd>, LifespanError> {
    let Some(requested) = requested_end(claim)? else {
        return Ok(None);
    };
    let anchor = maximum_anchor(claim)?.unwrap_or(now);
    let maximum = effective_maximum_end(limits, anchor, now)?;
    Ok(Some(clamp(requested, maximum, true)))
}

/// The end of a handle given to a claim now, created for it (§7.2) or bound to it (Δ§3.2 step 7):
/// the claim's requested end, else now + default, else now + relativeMaximum, else now +
/// maximum; then clamped to the effective maximum anchored now, since the claim starts now.
///
/// `None` means the handle gets no end. At bind this means *remove* a pool handle's unclaimed
/// end: that end only rotates idle pool members and must not cut the claim short
/// (Poolboy 1.12 §10.3 kept it, a bug). The fallbacks match creation for a claim, so a claim
/// ends the same way whether it got a fresh handle or a pooled one.
pub(crate) fn handle_end_for_claim(
    claim: &ResourceClaim,
    limits: &LifespanLimits,
    now: DateTime<Utc>,
) -> Result<Option<ClampedEnd>, LifespanError> {
    let limits = limits.effective();
    let requested = requested_end(claim)?;
    let candidate = match requested {
        Some(requested) => requested,
        None => {
            let fallback = [
                (limits.default, "spec.lifespan.default"),
                (limits.relative_maximum, "spec.lifespan.relativeMaximum"),
                (limits.maximum, "spec.lifespan.maximum"),
            ]
            .into_iter()
            .find_map(|(interval, field)| interval.map(|i| (i, field)));
            match fallback {
                Some((interval, field)) => later(now, interval, field)?,
                None => return Ok(None),
            }
        }
    };
    let maximum = effective_maximum_end(&limits, now, now)?;
    Ok(Some(clamp(candidate, maximum, requested.is_some())))
}

/// The lifespan of a handle created for a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimHandleLifespan {
    /// The handle's `spec.lifespan`; `None` when nothing is set.
    pub lifespan: Option<HandleLifespan>,
    /// When set, write it to the claim's `spec.lifespan.end` (see [`ClampedEnd::rewrite_request`]).
    pub rewrite_request: Option<DateTime<Utc>>,
}

/// The lifespan of a handle created for a claim (Poolboy 1.12 §7.2). `providers` holds the
/// lifespan of each provider of the claim (one for a provider claim), each interval evaluated
/// for the claim, with `text` the provider's raw (possibly templated) string. Per field the
/// smallest value wins (§10.5); `default` is stored normalised (`1d2h`), `maximum` and
/// `relativeMaximum` as the winning provider's raw text so they are re-evaluated per claim
/// later. The end is [`handle_end_for_claim`].
pub(crate) fn new_claim_handle_lifespan(
    claim: &ResourceClaim,
    providers: &[EvaluatedLifespan],
    now: DateTime<Utc>,
) -> Result<ClaimHandleLifespan, LifespanError> {
    let chosen = EvaluatedLifespan::tightest(providers);
    let end = handle_end_for_claim(claim, &chosen.limits(), now)?;
    let lifespan = HandleLifespan {
        default: chosen
            .default
            .map(|d| format_interval(d.value))
            .filter(|d| !d.is_empty()),
        end: end.map(|e| format_timestamp(e.end)),
        maximum: chosen.maximum.map(|m| m.text),
        relative_maximum: chosen.relative_maximum.map(|r| r.text),
    };
    Ok(ClaimHandleLifespan {
        lifespan: (lifespan != HandleLifespan::default()).then_some(lifespan),
        rewrite_request: end.filter(|e| e.rewrite_request).map(|e| e.end),
    })
}

/// The lifespan of a handle a pool creates (Poolboy 1.12 §10.2, §11 step 5). The pool's
/// `spec.lifespan`, when present, replaces the provider's entirely; otherwise `provider` is the
/// lifespan of the pool's `spec.provider` (pass `None` for pools with explicit resources).
/// `default`, `maximum` and `relativeMaximum` are copied raw, each to its own field (Poolboy
/// wrote the provider's relativeMaximum into `maximum`, Q12); `end = now + unclaimed`, with
/// `unclaimed` evaluated by `parse_interval`.
pub(crate) fn new_pool_handle_lifespan<E: std::fmt::Display>(
    pool: Option<&LifespanSettings>,
    provider: Option<&LifespanSettings>,
    now: DateTime<Utc>,
    parse_interval: impl FnOnce(&str) -> Result<TimeDelta, E>,
) -> Result<Option<HandleLifespan>, LifespanError> {
    let (default, maximum, relative_maximum, unclaimed, field) = match (pool, provider) {
        (Some(p), _) => (
            &p.default,
            &p.maximum,
            &p.relative_maximum,
            &p.unclaimed,
            "ResourcePool spec.lifespan.unclaimed",
        ),
        (None, Some(p)) => (
            &p.default,
            &p.maximum,
            &p.relative_maximum,
            &p.unclaimed,
            "ResourceProvider spec.lifespan.unclaimed",
        ),
        (None, None) => return Ok(None),
    };
    let end = match non_empty(unclaimed.as_deref()) {
        Some(text) => {
            let interval = parse_interval(text).map_err(|e| LifespanError::InvalidInterval {
                field,
                value: text.to_owned(),
                reason: e.to_string(),
            })?;
            if interval > TimeDelta::zero() {
                Some(format_timestamp(later(now, interval, field)?))
            } else {
                None
            }
        }
        None => None,
    };
    let copy = |s: &Option<String>| non_empty(s.as_deref()).map(str::to_owned);
    let lifespan = HandleLifespan {
        default: copy(default),
        end,
        maximum: copy(maximum),
        relative_maximum: copy(relative_maximum),
    };
    Ok((lifespan != HandleLifespan::default()).then_some(lifespan))
}

/// What a claim's lifespan should look like after looking at its handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimLifespanSync {
    /// First-ready reset (Poolboy 1.12 §7.4, #123): write this to the claim's
    /// `spec.lifespan.end`, so that the default lifespan counts from readiness.
    pub reset_request: Option<DateTime<Utc>>,
    /// The claim's `status.lifespan` as it should be (write it only if it differs).
    pub status: ClaimStatusLifespan,
}

/// Syncs a claim's lifespan from its bound handle (Poolboy 1.12 §7 step 8 and §7.4): `lifespan`
/// is the handle's lifespan evaluated for this claim, each `text` the rendered string.
///
/// `status`: a claim without `status.lifespan` (just bound) gets `start = bound_on`, the
/// instant the bind was decided at, whose clock set the handle's end (so a default of 23s is 23
/// seconds after the start; the record may be written a pass later), or `now` without one;
/// otherwise its `start` is kept. `end` mirrors the handle's end (absent when the handle has none),
/// `firstReady` is kept or set to now the first time the handle is ready, and `maximum` /
/// `relativeMaximum` follow the current evaluation. They are written in the CRD's single-unit
/// form: the rendered text when it is one (`72h`), else the value in its largest exact unit
/// (`1h30m` → `90m`); Poolboy wrote `1h30m`, which the CRD pattern rejects (§10.1).
///
/// `reset_request`: when the handle is ready, the claim has a `status.lifespan` without
/// `firstReady`, the handle has a default, and the claim's requested end is unset or still
/// `start + default`: `now + default`. A claim bound to a handle that is already ready gets
/// `firstReady` at bind and no reset, its end having just been set from the default.
pub(crate) fn sync_claim_lifespan(
    claim: &ResourceClaim,
    handle: &ResourceHandle,
    lifespan: &EvaluatedLifespan,
    now: DateTime<Utc>,
    bound_on: Option<DateTime<Utc>>,
) -> Result<ClaimLifespanSync, LifespanError> {
    let ready = handle.status.as_ref().and_then(|s| s.ready) == Some(true);
    let handle_end = handle
        .spec
        .lifespan
        .as_ref()
        .and_then(|l| non_empty(l.end.as_deref()))
        .map(str::to_owned);
    let now_text = format_timestamp(now);
    let status_interval = |i: &Option<EvaluatedInterval>| {
        i.as_ref()
            .filter(|i| i.value > TimeDelta::zero())
            .map(status_interval)
    };
    let mut status = ClaimStatusLifespan {
        start: None,
        end: handle_end,
        first_ready: None,
        maximum: status_interval(&lifespan.maximum),
        relative_maximum: status_interval(&lifespan.relative_maximum),
    };
    let current = claim.status.as_ref().and_then(|s| s.lifespan.as_ref());
    let mut reset_request = None;
    match current {
        None => {
            status.start = Some(format_timestamp(bound_on.unwrap_or(now)));
            status.first_ready = ready.then_some(now_text);
        }
        Some(current) => {
            status.start = current.start.clone();
            status.first_ready = match non_empty(current.first_ready.as_deref()) {
                Some(first_ready) => Some(first_ready.to_owned()),
                None if ready => {
                    reset_request = first_ready_reset(claim, lifespan.limits().default, now)?;
                    Some(now_text)
                }
                None => None,
            };
        }
    }
    Ok(ClaimLifespanSync {
        reset_request,
        status,
    })
}

/// Whether a claim may act yet (Poolboy 1.17 Δ§3.1.1, B19).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartGate {
    Open,
    /// Do nothing at all before this instant; requeue then.
    OpensAt(DateTime<Utc>),
}

/// The start gate: the claim's effective start is `status.lifespan.start`, else
/// `spec.lifespan.start`, else its creation time; before it, nothing happens to the claim.
pub(crate) fn start_gate(
    claim: &ResourceClaim,
    now: DateTime<Utc>,
) -> Result<StartGate, LifespanError> {
    Ok(match effective_start(claim)? {
        Some(start) if start > now => StartGate::OpensAt(start),
        _ => StartGate::Open,
    })
}

/// When something ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// No end is set.
    Never,
    /// Ends at this instant; requeue then.
    At(DateTime<Utc>),
    /// The end has been reached: delete now.
    Expired,
}

/// A handle expires at its `spec.lifespan.end` and is then deleted (Poolboy 1.12 §10.3), which
/// cascades to its claim and resources. It counts as expired from the instant itself (Poolboy:
/// strictly after), so a requeue at [`Expiry::At`] finds it expired instead of spinning.
pub(crate) fn handle_expiry(
    handle: &ResourceHandle,
    now: DateTime<Utc>,
) -> Result<Expiry, LifespanError> {
    let end = handle.spec.lifespan.as_ref().and_then(|l| l.end.as_deref());
    Ok(expiry(
        optional_timestamp("ResourceHandle spec.lifespan.end", end)?,
        now,
    ))
}

/// A detached claim is deleted when its `status.lifespan.end` is reached (Poolboy 1.12 §7 step 2,
/// §7.5); a claim that is not detached never expires by this rule (its handle's expiry does it).
pub(crate) fn detached_claim_expiry(
    claim: &ResourceClaim,
    now: DateTime<Utc>,
) -> Result<Expiry, LifespanError> {
    let status = claim.status.as_ref();
    let detached = status
        .and_then(|s| s.resource_handle.as_ref())
        .and_then(|h| h.detached)
        == Some(true);
    if !detached {
        return Ok(Expiry::Never);
    }
    let end = status
        .and_then(|s| s.lifespan.as_ref())
        .and_then(|l| l.end.as_deref());
    Ok(expiry(
        optional_timestamp("ResourceClaim status.lifespan.end", end)?,
        now,
    ))
}

/// An interval as `status.lifespan.maximum`/`relativeMaximum` accept it (`^[0-9]+[smhd]$`).
fn status_interval(interval: &EvaluatedInterval) -> String {
    let text = interval.text.as_str();
    let single_unit = text
        .strip_suffix(['s', 'm', 'h', 'd'])
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
    if single_unit {
        return text.to_owned();
    }
    format_simple_interval(interval.value)
}

/// §7.4: `now + default` when the requested end is unset or still `start + default`.
fn first_ready_reset(
    claim: &ResourceClaim,
    default: Option<TimeDelta>,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, LifespanError> {
    let Some(default) = default else {
        return Ok(None);
    };
    let unchanged = match requested_end(claim)? {
        None => true,
        Some(requested) => {
            effective_start(claim)?.is_some_and(|start| requested - start == default)
        }
    };
    if unchanged {
        Ok(Some(later(now, default, "spec.lifespan.default")?))
    } else {
        Ok(None)
    }
}

fn clamp(candidate: DateTime<Utc>, maximum: Option<MaximumEnd>, requested: bool) -> ClampedEnd {
    match maximum {
        Some(maximum) if candidate > maximum.at => ClampedEnd {
            end: maximum.at,
            rewrite_request: requested && maximum.bound == MaximumBound::RelativeMaximum,
        },
        _ => ClampedEnd {
            end: candidate,
            rewrite_request: false,
        },
    }
}

fn expiry(end: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Expiry {
    match end {
        None => Expiry::Never,
        Some(end) if now >= end => Expiry::Expired,
        Some(end) => Expiry::At(end),
    }
}

fn requested_end(claim: &ResourceClaim) -> Result<Option<DateTime<Utc>>, LifespanError> {
    let end = claim.spec.lifespan.as_ref().and_then(|l| l.end.as_deref());
    optional_timestamp("ResourceClaim spec.lifespan.end", end)
}

/// `status.lifespan.start`, else `spec.lifespan.start`, else `metadata.creationTimestamp`
/// (Poolboy 1.17 `lifespan_start_timestamp`).
fn effective_start(claim: &ResourceClaim) -> Result<Option<DateTime<Utc>>, LifespanError> {
    let status_start = claim
        .status
        .as_ref()
        .and_then(|s| s.lifespan.as_ref())
        .and_then(|l| l.start.as_deref());
    if let Some(start) = optional_timestamp("ResourceClaim status.lifespan.start", status_start)? {
        return Ok(Some(start));
    }
    let spec_start = claim
        .spec
        .lifespan
        .as_ref()
        .and_then(|l| l.start.as_deref());
    if let Some(start) = optional_timestamp("ResourceClaim spec.lifespan.start", spec_start)? {
        return Ok(Some(start));
    }
    claim
        .metadata
        .creation_timestamp
        .as_ref()
        .map(from_kubernetes_time)
        .transpose()
}

/// §10.4: the maximum counts from first ready, else from the lifespan start.
fn maximum_anchor(claim: &ResourceClaim) -> Result<Option<DateTime<Utc>>, LifespanError> {
    let first_ready = claim
        .status
        .as_ref()
        .and_then(|s| s.lifespan.as_ref())
        .and_then(|l| l.first_ready.as_deref());
    match optional_timestamp("ResourceClaim status.lifespan.firstReady", first_ready)? {
        Some(first_ready) => Ok(Some(first_ready)),
        None => effective_start(claim),
    }
}

/// An optional timestamp field; empty counts as unset (Python truthiness).
fn optional_timestamp(
    field: &'static str,
    value: Option<&str>,
) -> Result<Option<DateTime<Utc>>, LifespanError> {
    non_empty(value)
        .map(|v| parse_timestamp(field, v))
        .transpose()
}

fn non_empty(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

fn from_kubernetes_time(time: &Time) -> Result<DateTime<Utc>, LifespanError> {
    let ts = time.0;
    DateTime::from_timestamp(ts.as_second(), 0)
        .and_then(|t| {
            t.checked_add_signed(TimeDelta::nanoseconds(i64::from(ts.subsec_nanosecond())))
        })
        .ok_or_else(|| LifespanError::InvalidTimestamp {
            field: "metadata.creationTimestamp",
            value: ts.to_string(),
            reason: "out of range".to_owned(),
        })
}

/// `base + interval`, in whole seconds, within the years a timestamp can be written in.
fn later(
    base: DateTime<Utc>,
    interval: TimeDelta,
    field: &'static str,
) -> Result<DateTime<Utc>, LifespanError> {
    base.checked_add_signed(interval)
        .filter(|t| (0..=LAST_WRITABLE_YEAR).contains(&t.year()))
        .map(|t| t.trunc_subsecs(0))
        .ok_or_else(|| LifespanError::OutOfRange {
            field,
            base: format_timestamp(base),
            interval: interval.num_seconds(),
        })
}

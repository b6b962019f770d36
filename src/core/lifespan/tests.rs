use chrono::{TimeDelta, TimeZone, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;

use super::*;
use crate::api::claim::{ClaimHandleRef, ClaimLifespan, ResourceClaimSpec, ResourceClaimStatus};
use crate::api::handle::{ResourceHandleSpec, ResourceHandleStatus};
use crate::core::test_fixtures::{at, now};

fn hours(n: i64) -> TimeDelta {
    TimeDelta::hours(n)
}

fn days(n: i64) -> TimeDelta {
    TimeDelta::days(n)
}

fn interval(text: &str, value: TimeDelta) -> Option<EvaluatedInterval> {
    Some(EvaluatedInterval::new(text, value))
}

/// A claim with the given requested end, status lifespan and creation time.
fn claim(
    requested_end: Option<&str>,
    status: Option<ClaimStatusLifespan>,
    created: Option<&str>,
) -> ResourceClaim {
    let mut claim = ResourceClaim::new(
        "c",
        ResourceClaimSpec {
            lifespan: requested_end.map(|end| ClaimLifespan {
                end: Some(end.into()),
                start: None,
            }),
            ..Default::default()
        },
    );
    claim.status = status.map(|lifespan| ResourceClaimStatus {
        lifespan: Some(lifespan),
        ..Default::default()
    });
    claim.metadata.creation_timestamp = created.map(|c| Time(c.parse().expect("a jiff timestamp")));
    claim
}

fn status_lifespan(start: &str, first_ready: Option<&str>) -> ClaimStatusLifespan {
    ClaimStatusLifespan {
        start: Some(start.into()),
        first_ready: first_ready.map(Into::into),
        ..Default::default()
    }
}

fn handle(end: Option<&str>, ready: Option<bool>) -> ResourceHandle {
    let mut handle = ResourceHandle::new(
        "guid-abcde",
        ResourceHandleSpec {
            lifespan: end.map(|end| HandleLifespan {
                end: Some(end.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    handle.status = Some(ResourceHandleStatus {
        ready,
        ..Default::default()
    });
    handle
}

fn limits(
    default: Option<TimeDelta>,
    maximum: Option<TimeDelta>,
    relative_maximum: Option<TimeDelta>,
) -> LifespanLimits {
    LifespanLimits {
        default,
        maximum,
        relative_maximum,
    }
}

// ---------------------------------------------------------------- timestamps

#[test]
fn timestamps_round_trip_in_poolboy_format() {
    let t = at("2026-11-21T12:00:00Z");
    assert_eq!(format_timestamp(t), "2026-11-21T12:00:00Z");
    // Offsets are converted; sub-seconds are dropped on output.
    assert_eq!(
        format_timestamp(at("2026-11-21T14:00:00.750+02:00")),
        "2026-11-21T12:00:00Z"
    );
}

#[test]
fn bad_timestamps_are_errors_naming_the_field() {
    for bad in ["", "tomorrow", "2025-03-01", "2025-03-01 12:00:00"] {
        let err = parse_timestamp("ResourceClaim spec.lifespan.end", bad).unwrap_err();
        assert!(matches!(err, LifespanError::InvalidTimestamp { .. }));
        assert!(
            err.to_string()
                .starts_with("ResourceClaim spec.lifespan.end: "),
            "{err}"
        );
    }
}

#[test]
fn bad_timestamps_in_objects_are_errors_not_panics() {
    let h = handle(Some("next tuesday"), None);
    let err = handle_expiry(&h, now()).unwrap_err();
    assert!(
        err.to_string().contains("ResourceHandle spec.lifespan.end"),
        "{err}"
    );
    let c = claim(Some("soon"), None, None);
    assert!(clamp_requested_end(&c, &LifespanLimits::default(), now()).is_err());
    assert!(handle_end_for_claim(&c, &LifespanLimits::default(), now()).is_err());
}

#[test]
fn ends_past_year_9999_are_errors() {
    let c = claim(None, None, None);
    let err =
        handle_end_for_claim(&c, &limits(Some(days(3_000_000)), None, None), now()).unwrap_err();
    assert!(matches!(
        err,
        LifespanError::OutOfRange {
            field: "spec.lifespan.default",
            ..
        }
    ));
}

#[test]
fn delay_until_is_zero_once_passed() {
    assert_eq!(
        delay_until(now() + TimeDelta::seconds(90), now()),
        Duration::from_secs(90)
    );
    assert_eq!(
        delay_until(now() - TimeDelta::seconds(1), now()),
        Duration::ZERO
    );
}

// ---------------------------------------------------------------- minimum across providers

#[test]
fn tightest_takes_each_field_from_its_own_smallest_provider() {
    let a = EvaluatedLifespan {
        default: interval("4h", hours(4)),
        maximum: interval("{{ max_a }}", days(10)),
        relative_maximum: interval("2d", days(2)),
    };
    let b = EvaluatedLifespan {
        default: interval("2h", hours(2)),
        maximum: interval("{{ max_b }}", days(5)),
        relative_maximum: None,
    };
    let c = EvaluatedLifespan {
        default: interval("0s", TimeDelta::zero()), // zero sets no limit
        maximum: interval("{{ tie }}", days(5)),    // a tie keeps the first
        relative_maximum: interval("3d", days(3)),
    };
    let t = EvaluatedLifespan::tightest([&a, &b, &c]);
    assert_eq!(t.default, interval("2h", hours(2)));
    assert_eq!(t.maximum, interval("{{ max_b }}", days(5)));
    assert_eq!(t.relative_maximum, interval("2d", days(2)));
}

#[test]
fn limits_ignore_non_positive_values() {
    let l = EvaluatedLifespan {
        default: interval("0s", TimeDelta::zero()),
        maximum: interval("-1h", hours(-1)),
        relative_maximum: interval("1h", hours(1)),
    }
    .limits();
    assert_eq!(l, limits(None, None, Some(hours(1))));
}

// ---------------------------------------------------------------- handles created for claims

#[test]
fn claim_handle_gets_the_default_end_and_normalised_default() {
    let c = claim(None, None, None);
    let provider = EvaluatedLifespan {
        default: interval("{{ d }}", hours(26) + TimeDelta::seconds(5)),
        maximum: interval("{{ 7 }}d", days(7)),
        relative_maximum: None,
    };
    let got = new_claim_handle_lifespan(&c, &[provider], now()).unwrap();
    assert_eq!(
        got.lifespan,
        Some(HandleLifespan {
            default: Some("1d2h5s".into()),
            end: Some("2026-11-22T14:00:05Z".into()),
            maximum: Some("{{ 7 }}d".into()),
            relative_maximum: None,
        })
    );
    assert_eq!(got.rewrite_request, None);
}

// Bug fix (§7.2, §16, Q12): relativeMaximum's end really comes from relativeMaximum.
#[test]
fn claim_handle_without_default_ends_at_relative_maximum_not_maximum() {
    let c = claim(None, None, None);
    let provider = EvaluatedLifespan {
        default: None,
        maximum: interval("7d", days(7)),
        relative_maximum: interval("1d", days(1)),
    };
    let got = new_claim_handle_lifespan(&c, &[provider], now()).unwrap();
    let lifespan = got.lifespan.unwrap();
    assert_eq!(lifespan.end.as_deref(), Some("2026-11-22T12:00:00Z"));
    assert_eq!(lifespan.maximum.as_deref(), Some("7d"));
    assert_eq!(lifespan.relative_maximum.as_deref(), Some("1d"));
}

#[test]
fn claim_handle_falls_back_to_maximum() {
    let c = claim(None, None, None);
    let provider = EvaluatedLifespan {
        maximum: interval("3d", days(3)),
        ..Default::default()
    };
    let got = new_claim_handle_lifespan(&c, &[provider], now()).unwrap();
    assert_eq!(
        got.lifespan.unwrap().end.as_deref(),
        Some("2026-11-24T12:00:00Z")
    );
}

#[test]
fn claim_handle_without_any_lifespan_has_none() {
    let c = claim(None, None, None);
    let got = new_claim_handle_lifespan(&c, &[EvaluatedLifespan::default()], now()).unwrap();
    assert_eq!(got.lifespan, None);
    assert_eq!(
        new_claim_handle_lifespan(&c, &[], now()).unwrap().lifespan,
        None
    );
}

#[test]
fn claim_handle_keeps_an_in_bounds_requested_end() {
    let c = claim(Some("2026-11-23T00:00:00Z"), None, None);
    let provider = EvaluatedLifespan {
        default: interval("1h", hours(1)),
        maximum: interval("7d", days(7)),
        relative_maximum: interval("2d", days(2)),
    };
    let got = new_claim_handle_lifespan(&c, &[provider], now()).unwrap();
    assert_eq!(
        got.lifespan.unwrap().end.as_deref(),
        Some("2026-11-23T00:00:00Z")
    );
    assert_eq!(got.rewrite_request, None);
}

// Bug fix (§7.2, §16): the requested end is clamped at creation; a relativeMaximum clamp is
// written back to the claim so that it does not slide later.
#[test]
fn claim_handle_clamps_the_requested_end_at_creation() {
    let c = claim(Some("2026-12-22T00:00:00Z"), None, None);
    let provider = EvaluatedLifespan {
        maximum: interval("7d", days(7)),
        relative_maximum: interval("2d", days(2)),
        ..Default::default()
    };
    let got = new_claim_handle_lifespan(&c, &[provider], now()).unwrap();
    assert_eq!(
        got.lifespan.unwrap().end.as_deref(),
        Some("2026-11-23T12:00:00Z")
    );
    assert_eq!(got.rewrite_request, Some(at("2026-11-23T12:00:00Z")));
}

#[test]
fn claim_handle_maximum_clamp_leaves_the_request_alone() {
    let c = claim(Some("2026-12-22T00:00:00Z"), None, None);
    let provider = EvaluatedLifespan {
        maximum: interval("7d", days(7)),
        ..Default::default()
    };
    let got = new_claim_handle_lifespan(&c, &[provider], now()).unwrap();
    assert_eq!(
        got.lifespan.unwrap().end.as_deref(),
        Some("2026-11-28T12:00:00Z")
    );
    assert_eq!(got.rewrite_request, None);
}

#[test]
fn claim_handle_default_beyond_maximum_is_clamped() {
    let c = claim(None, None, None);
    let provider = EvaluatedLifespan {
        default: interval("3d", days(3)),
        maximum: interval("1d", days(1)),
        ..Default::default()
    };
    let got = new_claim_handle_lifespan(&c, &[provider], now()).unwrap();
    assert_eq!(
        got.lifespan.unwrap().end.as_deref(),
        Some("2026-11-22T12:00:00Z")
    );
    assert_eq!(got.rewrite_request, None);
}

#[test]
fn resources_claim_handle_uses_the_minimum_across_providers() {
    let c = claim(None, None, None);
    let a = EvaluatedLifespan {
        default: interval("{{ a_default }}", hours(8)),
        maximum: interval("{{ a_max }}", days(3)),
        relative_maximum: interval("{{ a_rel }}", days(1)),
    };
    let b = EvaluatedLifespan {
        default: interval("{{ b_default }}", TimeDelta::minutes(90)),
        maximum: interval("{{ b_max }}", days(5)),
        relative_maximum: interval("{{ b_rel }}", hours(12)),
    };
    let got = new_claim_handle_lifespan(&c, &[a, b], now()).unwrap();
    assert_eq!(
        got.lifespan,
        Some(HandleLifespan {
            default: Some("1h30m".into()),
            end: Some("2026-11-21T13:30:00Z".into()),
            maximum: Some("{{ a_max }}".into()),
            relative_maximum: Some("{{ b_rel }}".into()),
        })
    );
}

// ---------------------------------------------------------------- bind

#[test]
fn bind_sets_now_plus_default() {
    let c = claim(None, None, None);
    let got =
        handle_end_for_claim(&c, &limits(Some(hours(4)), Some(days(7)), None), now()).unwrap();
    assert_eq!(
        got,
        Some(ClampedEnd {
            end: at("2026-11-21T16:00:00Z"),
            rewrite_request: false
        })
    );
}

// Bug fix (§10.3, §16): without a default, bind does not keep the pool's unclaimed end.
#[test]
fn bind_without_default_falls_back_like_creation() {
    let c = claim(None, None, None);
    let rel = handle_end_for_claim(&c, &limits(None, Some(days(7)), Some(days(1))), now()).unwrap();
    assert_eq!(rel.map(|e| e.end), Some(at("2026-11-22T12:00:00Z")));
    let max = handle_end_for_claim(&c, &limits(None, Some(days(7)), None), now()).unwrap();
    assert_eq!(max.map(|e| e.end), Some(at("2026-11-28T12:00:00Z")));
    // Nothing applies: no end, i.e. the unclaimed end must be removed.
    let none = handle_end_for_claim(&c, &LifespanLimits::default(), now()).unwrap();
    assert_eq!(none, None);
}

#[test]
fn bind_honours_and_clamps_the_claims_requested_end() {
    let c = claim(
        Some("2026-11-25T00:00:00Z"),
        None,
        Some("2026-10-24T00:00:00Z"),
    );
    let l = limits(Some(hours(4)), Some(days(7)), Some(days(2)));
    let got = handle_end_for_claim(&c, &l, now()).unwrap();
    // Anchored now, not at the claim's creation a month ago.
    assert_eq!(
        got,
        Some(ClampedEnd {
            end: at("2026-11-23T12:00:00Z"),
            rewrite_request: true
        })
    );
}

// ---------------------------------------------------------------- effective maximum

#[test]
fn effective_maximum_is_the_earlier_bound() {
    let anchor = at("2026-11-19T12:00:00Z");
    let l = limits(None, Some(days(5)), Some(days(1)));
    assert_eq!(
        effective_maximum_end(&l, anchor, now()).unwrap(),
        Some(MaximumEnd {
            at: at("2026-11-22T12:00:00Z"),
            bound: MaximumBound::RelativeMaximum
        })
    );
    let l = limits(None, Some(days(3)), Some(days(2)));
    assert_eq!(
        effective_maximum_end(&l, anchor, now()).unwrap(),
        Some(MaximumEnd {
            at: at("2026-11-22T12:00:00Z"),
            bound: MaximumBound::Maximum
        })
    );
    let l = limits(Some(hours(1)), None, None);
    assert_eq!(effective_maximum_end(&l, anchor, now()).unwrap(), None);
}

#[test]
fn clamp_anchors_maximum_at_first_ready_then_start_then_creation() {
    let l = limits(None, Some(days(2)), None);
    let far = Some("2027-09-23T00:00:00Z");
    let created = Some("2026-11-12T00:00:00Z");

    let by_creation = claim(far, None, created);
    assert_eq!(
        clamp_requested_end(&by_creation, &l, now())
            .unwrap()
            .unwrap()
            .end,
        at("2026-11-14T00:00:00Z")
    );

    let mut by_spec_start = claim(far, None, created);
    by_spec_start.spec.lifespan.as_mut().unwrap().start = Some("2026-11-17T00:00:00Z".into());
    assert_eq!(
        clamp_requested_end(&by_spec_start, &l, now())
            .unwrap()
            .unwrap()
            .end,
        at("2026-11-19T00:00:00Z")
    );

    let by_start = claim(
        far,
        Some(status_lifespan("2026-11-18T00:00:00Z", None)),
        created,
    );
    assert_eq!(
        clamp_requested_end(&by_start, &l, now())
            .unwrap()
            .unwrap()
            .end,
        at("2026-11-20T00:00:00Z")
    );

    let by_first_ready = claim(
        far,
        Some(status_lifespan(
            "2026-11-18T00:00:00Z",
            Some("2026-11-20T06:00:00Z"),
        )),
        created,
    );
    let got = clamp_requested_end(&by_first_ready, &l, now())
        .unwrap()
        .unwrap();
    assert_eq!(got.end, at("2026-11-22T06:00:00Z"));
    assert!(!got.rewrite_request);
}

#[test]
fn clamp_without_request_does_nothing() {
    let c = claim(None, None, Some("2026-11-12T00:00:00Z"));
    let l = limits(Some(hours(1)), Some(days(2)), Some(days(1)));
    assert_eq!(clamp_requested_end(&c, &l, now()).unwrap(), None);
}

#[test]
fn clamp_keeps_an_in_bounds_request() {
    let c = claim(
        Some("2026-11-22T00:00:00Z"),
        Some(status_lifespan("2026-11-21T00:00:00Z", None)),
        None,
    );
    let l = limits(None, Some(days(7)), Some(days(2)));
    assert_eq!(
        clamp_requested_end(&c, &l, now()).unwrap(),
        Some(ClampedEnd {
            end: at("2026-11-22T00:00:00Z"),
            rewrite_request: false
        })
    );
}

// Bug fix (§10.4, §16): a request beyond relativeMaximum must not slide forward on every pass.
#[test]
fn requests_beyond_relative_maximum_do_not_slide() {
    let l = limits(None, Some(days(30)), Some(days(2)));
    let status = Some(status_lifespan(
        "2026-11-21T00:00:00Z",
        Some("2026-11-21T01:00:00Z"),
    ));
    let mut c = claim(Some("2027-09-22T00:00:00Z"), status, None);

    let first = clamp_requested_end(&c, &l, now()).unwrap().unwrap();
    assert_eq!(
        first,
        ClampedEnd {
            end: at("2026-11-23T12:00:00Z"),
            rewrite_request: true
        }
    );
    // The controller writes the clamped end back as the claim's request.
    c.spec.lifespan.as_mut().unwrap().end = Some(format_timestamp(first.end));

    for later_now in [
        "2026-11-21T18:00:00Z",
        "2026-11-22T12:00:00Z",
        "2026-11-23T11:00:00Z",
    ] {
        let again = clamp_requested_end(&c, &l, at(later_now)).unwrap().unwrap();
        assert_eq!(
            again,
            ClampedEnd {
                end: at("2026-11-23T12:00:00Z"),
                rewrite_request: false
            },
            "at {later_now}"
        );
    }
}

// ---------------------------------------------------------------- pool handles

fn parse_test_interval(text: &str) -> Result<TimeDelta, String> {
    match text {
        "1h" => Ok(hours(1)),
        "2d" => Ok(days(2)),
        "0s" => Ok(TimeDelta::zero()),
        other => Err(format!("cannot parse {other:?}")),
    }
}

fn provider_lifespan() -> LifespanSettings {
    LifespanSettings {
        default: Some("{{ provider_default }}".into()),
        maximum: Some("14d".into()),
        relative_maximum: Some("3d".into()),
        unclaimed: Some("2d".into()),
    }
}

// Bug fix (§10.2, Q12): the provider's relativeMaximum goes to relativeMaximum.
#[test]
fn pool_handle_copies_the_provider_lifespan_field_by_field() {
    let got =
        new_pool_handle_lifespan(None, Some(&provider_lifespan()), now(), parse_test_interval)
            .unwrap();
    assert_eq!(
        got,
        Some(HandleLifespan {
            default: Some("{{ provider_default }}".into()),
            end: Some("2026-11-23T12:00:00Z".into()),
            maximum: Some("14d".into()),
            relative_maximum: Some("3d".into()),
        })
    );
}

#[test]
fn pool_lifespan_replaces_the_providers_entirely() {
    let pool = LifespanSettings {
        default: Some("4h".into()),
        maximum: None,
        relative_maximum: Some("".into()),
        unclaimed: Some("1h".into()),
    };
    let got = new_pool_handle_lifespan(
        Some(&pool),
        Some(&provider_lifespan()),
        now(),
        parse_test_interval,
    )
    .unwrap();
    assert_eq!(
        got,
        Some(HandleLifespan {
            default: Some("4h".into()),
            end: Some("2026-11-21T13:00:00Z".into()),
            maximum: None,
            relative_maximum: None,
        })
    );
}

#[test]
fn pool_handle_without_unclaimed_has_no_end() {
    let pool = LifespanSettings {
        maximum: Some("1d".into()),
        unclaimed: Some("0s".into()),
        ..Default::default()
    };
    let got = new_pool_handle_lifespan(Some(&pool), None, now(), parse_test_interval).unwrap();
    assert_eq!(got.unwrap().end, None);
    assert_eq!(
        new_pool_handle_lifespan(
            Some(&LifespanSettings::default()),
            None,
            now(),
            parse_test_interval
        )
        .unwrap(),
        None
    );
    assert_eq!(
        new_pool_handle_lifespan(None, None, now(), parse_test_interval).unwrap(),
        None
    );
}

#[test]
fn pool_handle_reports_a_bad_unclaimed_interval() {
    let pool = LifespanSettings {
        unclaimed: Some("soon".into()),
        ..Default::default()
    };
    let err = new_pool_handle_lifespan(Some(&pool), None, now(), parse_test_interval).unwrap_err();
    assert_eq!(
        err,
        LifespanError::InvalidInterval {
            field: "ResourcePool spec.lifespan.unclaimed",
            value: "soon".into(),
            reason: "cannot parse \"soon\"".into(),
        }
    );
}

// ---------------------------------------------------------------- claim status and first ready

fn handle_lifespan() -> EvaluatedLifespan {
    EvaluatedLifespan {
        default: interval("{{ d }}", hours(4)),
        maximum: interval("72h", hours(72)),
        relative_maximum: interval("1h30m", TimeDelta::minutes(90)),
    }
}

#[test]
fn bind_writes_a_new_status_lifespan() {
    let c = claim(None, None, Some("2026-11-20T00:00:00Z"));
    let h = handle(Some("2026-11-21T16:00:00Z"), Some(true));
    let got = sync_claim_lifespan(&c, &h, &handle_lifespan(), now(), None).unwrap();
    assert_eq!(
        got,
        ClaimLifespanSync {
            // Just bound to a ready handle: its end was just set from the default.
            reset_request: None,
            status: ClaimStatusLifespan {
                start: Some("2026-11-21T12:00:00Z".into()),
                end: Some("2026-11-21T16:00:00Z".into()),
                first_ready: Some("2026-11-21T12:00:00Z".into()),
                maximum: Some("72h".into()),
                relative_maximum: Some("90m".into()),
            }
        }
    );
}

/// The bind is recorded a pass after it was decided (its handle's resources first): the
/// start is the bind's instant, whose clock set the handle's end, not the recording pass's.
#[test]
fn a_bind_recorded_later_starts_when_it_was_decided() {
    let c = claim(None, None, None);
    let h = handle(Some("2026-11-21T12:00:23Z"), Some(true));
    let decided = at("2026-11-21T12:00:00.900Z");
    let recorded = at("2026-11-21T12:00:01.100Z");
    let got = sync_claim_lifespan(&c, &h, &handle_lifespan(), recorded, Some(decided)).unwrap();
    assert_eq!(got.status.start.as_deref(), Some("2026-11-21T12:00:00Z"));
    assert_eq!(got.status.end.as_deref(), Some("2026-11-21T12:00:23Z"));
    assert_eq!(
        got.status.first_ready.as_deref(),
        Some("2026-11-21T12:00:01Z")
    );
}

#[test]
fn bind_to_a_handle_without_lifespan_still_records_the_start() {
    let c = claim(None, None, None);
    let h = handle(None, None);
    let got = sync_claim_lifespan(&c, &h, &EvaluatedLifespan::default(), now(), None).unwrap();
    assert_eq!(
        got.status,
        ClaimStatusLifespan {
            start: Some("2026-11-21T12:00:00Z".into()),
            ..Default::default()
        }
    );
}

#[test]
fn first_ready_resets_an_unset_request() {
    let c = claim(
        None,
        Some(status_lifespan("2026-11-21T08:00:00Z", None)),
        None,
    );
    let h = handle(Some("2026-11-21T12:00:00Z"), Some(true));
    let got = sync_claim_lifespan(&c, &h, &handle_lifespan(), now(), None).unwrap();
    assert_eq!(got.reset_request, Some(at("2026-11-21T16:00:00Z")));
    assert_eq!(
        got.status.first_ready.as_deref(),
        Some("2026-11-21T12:00:00Z")
    );
    assert_eq!(got.status.start.as_deref(), Some("2026-11-21T08:00:00Z"));
}

#[test]
fn first_ready_resets_a_request_still_at_start_plus_default() {
    let c = claim(
        Some("2026-11-21T12:00:00Z"),
        Some(status_lifespan("2026-11-21T08:00:00Z", None)),
        None,
    );
    let h = handle(Some("2026-11-21T12:00:00Z"), Some(true));
    let got =
        sync_claim_lifespan(&c, &h, &handle_lifespan(), at("2026-11-21T09:30:00Z"), None).unwrap();
    assert_eq!(got.reset_request, Some(at("2026-11-21T13:30:00Z")));
}

#[test]
fn first_ready_keeps_a_user_request() {
    let c = claim(
        Some("2026-11-25T00:00:00Z"),
        Some(status_lifespan("2026-11-21T08:00:00Z", None)),
        None,
    );
    let h = handle(Some("2026-11-25T00:00:00Z"), Some(true));
    let got = sync_claim_lifespan(&c, &h, &handle_lifespan(), now(), None).unwrap();
    assert_eq!(got.reset_request, None);
    assert_eq!(
        got.status.first_ready.as_deref(),
        Some("2026-11-21T12:00:00Z")
    );
}

#[test]
fn first_ready_happens_once() {
    let c = claim(
        None,
        Some(status_lifespan(
            "2026-11-21T08:00:00Z",
            Some("2026-11-21T09:00:00Z"),
        )),
        None,
    );
    let h = handle(Some("2026-11-21T13:00:00Z"), Some(true));
    let got = sync_claim_lifespan(&c, &h, &handle_lifespan(), now(), None).unwrap();
    assert_eq!(got.reset_request, None);
    assert_eq!(
        got.status.first_ready.as_deref(),
        Some("2026-11-21T09:00:00Z")
    );
}

#[test]
fn no_reset_without_default_or_readiness() {
    let c = claim(
        None,
        Some(status_lifespan("2026-11-21T08:00:00Z", None)),
        None,
    );
    let ready = handle(Some("2026-11-22T00:00:00Z"), Some(true));
    let no_default = EvaluatedLifespan {
        default: None,
        ..handle_lifespan()
    };
    let got = sync_claim_lifespan(&c, &ready, &no_default, now(), None).unwrap();
    assert_eq!(got.reset_request, None);
    assert_eq!(
        got.status.first_ready.as_deref(),
        Some("2026-11-21T12:00:00Z")
    );

    let not_ready = handle(Some("2026-11-22T00:00:00Z"), Some(false));
    let got = sync_claim_lifespan(&c, &not_ready, &handle_lifespan(), now(), None).unwrap();
    assert_eq!(got.reset_request, None);
    assert_eq!(got.status.first_ready, None);
}

#[test]
fn status_mirrors_the_handle_end_and_current_maximums() {
    let current = ClaimStatusLifespan {
        start: Some("2026-11-21T08:00:00Z".into()),
        end: Some("2026-11-21T20:00:00Z".into()),
        first_ready: Some("2026-11-21T09:00:00Z".into()),
        maximum: Some("5d".into()),
        relative_maximum: Some("1d".into()),
    };
    let c = claim(None, Some(current), None);
    let h = handle(None, Some(true));
    let evaluated = EvaluatedLifespan {
        default: None,
        maximum: interval("{{ m }}", days(2)),
        relative_maximum: None,
    };
    let got = sync_claim_lifespan(&c, &h, &evaluated, now(), None).unwrap();
    assert_eq!(
        got.status,
        ClaimStatusLifespan {
            start: Some("2026-11-21T08:00:00Z".into()),
            end: None,
            first_ready: Some("2026-11-21T09:00:00Z".into()),
            maximum: Some("2d".into()),
            relative_maximum: None,
        }
    );
}

#[test]
fn status_intervals_use_the_crd_single_unit_form() {
    let cases = [
        ("72h", hours(72), "72h"),
        ("3d", days(3), "3d"),
        ("1h30m", TimeDelta::minutes(90), "90m"),
        ("{{ x }}", days(2), "2d"),
        (" 2d ", days(2), "2d"),
        ("1d1s", days(1) + TimeDelta::seconds(1), "86401s"),
        ("d", hours(1), "1h"),
    ];
    for (text, value, want) in cases {
        assert_eq!(
            status_interval(&EvaluatedInterval::new(text, value)),
            want,
            "{text}"
        );
    }
}

#[test]
fn normalised_intervals_match_poolboy_timedelta_to_str() {
    assert_eq!(format_interval(TimeDelta::minutes(30)), "30m");
    assert_eq!(format_interval(hours(26)), "1d2h");
    assert_eq!(format_interval(days(1) + TimeDelta::seconds(61)), "1d1m1s");
    assert_eq!(format_interval(TimeDelta::milliseconds(1500)), "1s");
}

// ---------------------------------------------------------------- start gate

#[test]
fn start_gate_uses_status_then_spec_then_creation() {
    let created_future = Some("2026-11-21T13:00:00Z");
    let c = claim(None, None, created_future);
    assert_eq!(
        start_gate(&c, now()).unwrap(),
        StartGate::OpensAt(at("2026-11-21T13:00:00Z"))
    );

    let mut spec_start = claim(None, None, Some("2026-10-24T00:00:00Z"));
    spec_start.spec.lifespan = Some(ClaimLifespan {
        end: None,
        start: Some("2026-11-22T00:00:00Z".into()),
    });
    assert_eq!(
        start_gate(&spec_start, now()).unwrap(),
        StartGate::OpensAt(at("2026-11-22T00:00:00Z"))
    );

    // Once bound, status.lifespan.start wins over a later spec start.
    let mut bound = spec_start.clone();
    bound.status = Some(ResourceClaimStatus {
        lifespan: Some(status_lifespan("2026-10-24T00:00:00Z", None)),
        ..Default::default()
    });
    assert_eq!(start_gate(&bound, now()).unwrap(), StartGate::Open);
}

#[test]
fn start_gate_opens_at_the_instant() {
    let c = claim(None, None, Some("2026-11-21T12:00:00Z"));
    assert_eq!(start_gate(&c, now()).unwrap(), StartGate::Open);
    assert_eq!(
        start_gate(&claim(None, None, None), now()).unwrap(),
        StartGate::Open
    );
}

// ---------------------------------------------------------------- expiry and bind edge

#[test]
fn handle_expiry_is_scheduled_and_reached_at_the_end() {
    assert_eq!(
        handle_expiry(&handle(None, None), now()).unwrap(),
        Expiry::Never
    );
    let h = handle(Some("2026-11-21T12:00:01Z"), None);
    assert_eq!(
        handle_expiry(&h, now()).unwrap(),
        Expiry::At(at("2026-11-21T12:00:01Z"))
    );
    assert_eq!(
        handle_expiry(&h, at("2026-11-21T12:00:01Z")).unwrap(),
        Expiry::Expired
    );
    assert_eq!(
        handle_expiry(&h, at("2026-11-22T00:00:00Z")).unwrap(),
        Expiry::Expired
    );
}

fn detached(detached: Option<bool>, end: Option<&str>) -> ResourceClaim {
    let mut c = claim(None, None, None);
    c.status = Some(ResourceClaimStatus {
        lifespan: Some(ClaimStatusLifespan {
            end: end.map(Into::into),
            ..Default::default()
        }),
        resource_handle: Some(ClaimHandleRef {
            detached,
            ..Default::default()
        }),
        ..Default::default()
    });
    c
}

#[test]
fn detached_claims_expire_at_their_status_end() {
    let past = Some("2026-11-21T00:00:00Z");
    let future = Some("2026-11-22T00:00:00Z");
    assert_eq!(
        detached_claim_expiry(&detached(Some(true), past), now()).unwrap(),
        Expiry::Expired
    );
    assert_eq!(
        detached_claim_expiry(&detached(Some(true), future), now()).unwrap(),
        Expiry::At(at("2026-11-22T00:00:00Z"))
    );
    assert_eq!(
        detached_claim_expiry(&detached(Some(true), None), now()).unwrap(),
        Expiry::Never
    );
    // Not detached: the handle's expiry governs, never this rule.
    assert_eq!(
        detached_claim_expiry(&detached(Some(false), past), now()).unwrap(),
        Expiry::Never
    );
    assert_eq!(
        detached_claim_expiry(&detached(None, past), now()).unwrap(),
        Expiry::Never
    );
}

#[test]
fn creation_timestamps_convert_exactly() {
    let c = claim(None, None, Some("2026-11-21T11:59:59.25Z"));
    assert_eq!(
        effective_start(&c).unwrap(),
        Some(
            Utc.with_ymd_and_hms(2026, 11, 21, 11, 59, 59).unwrap() + TimeDelta::milliseconds(250)
        )
    );
}

// ---------------------------------------------------------------- properties

fn opt_delta() -> impl Strategy<Value = Option<TimeDelta>> {
    proptest::option::of((1i64..2_000_000).prop_map(TimeDelta::seconds))
}

proptest! {
    #[test]
    fn a_claimed_handle_never_ends_past_the_maximum(
        default in opt_delta(), maximum in opt_delta(), relative in opt_delta(),
        requested in proptest::option::of(-1_000_000i64..5_000_000),
    ) {
        let requested = requested.map(|s| format_timestamp(now() + TimeDelta::seconds(s)));
        let c = claim(requested.as_deref(), None, None);
        let l = limits(default, maximum, relative);
        let got = handle_end_for_claim(&c, &l, now()).unwrap();
        if let (Some(max), Some(got)) = (effective_maximum_end(&l, now(), now()).unwrap(), got) {
            prop_assert!(got.end <= max.at);
        }
        prop_assert_eq!(got.is_none(), requested.is_none() && l.default.is_none() && maximum.is_none() && relative.is_none());
    }

    #[test]
    fn a_rewritten_request_is_stable(
        maximum in opt_delta(), relative in 1i64..1_000_000, ahead in 1i64..5_000_000, wait in 0i64..1_000_000,
    ) {
        let status = Some(status_lifespan("2026-11-21T00:00:00Z", None));
        let requested = format_timestamp(now() + TimeDelta::seconds(ahead));
        let mut c = claim(Some(&requested), status, None);
        let l = limits(None, maximum, Some(TimeDelta::seconds(relative)));
        let first = clamp_requested_end(&c, &l, now()).unwrap().unwrap();
        if first.rewrite_request {
            c.spec.lifespan.as_mut().unwrap().end = Some(format_timestamp(first.end));
        }
        let later_now = now() + TimeDelta::seconds(wait);
        let again = clamp_requested_end(&c, &l, later_now).unwrap().unwrap();
        prop_assert_eq!(again.end, first.end);
        prop_assert!(!again.rewrite_request);
    }

    #[test]
    fn status_intervals_always_fit_the_crd_pattern(seconds in 1i64..100_000_000, text in ".{0,8}") {
        let got = status_interval(&EvaluatedInterval::new(text, TimeDelta::seconds(seconds)));
        let digits = got.strip_suffix(['s', 'm', 'h', 'd']).unwrap();
        prop_assert!(!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
    }

    #[test]
    fn parse_never_panics(text in ".{0,40}") {
        let _ = parse_timestamp("test", &text);
    }
}

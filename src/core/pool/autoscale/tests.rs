use serde_json::json;

use super::*;
use crate::api::ResourceHandle;
use crate::core::test_fixtures::now;

fn spec(min: Option<i64>, max: i64, window: Option<&str>) -> PoolAutoscale {
    PoolAutoscale {
        min,
        max,
        window: window.map(str::to_owned),
    }
}

/// A history that has watched since `watched` ago and saw `binds` binds just now.
fn history(watched: TimeDelta, binds: usize) -> BindHistory {
    let mut history = BindHistory::default();
    let start = now() - watched;
    let names: Vec<String> = (0..binds).map(|i| format!("guid-{i}")).collect();
    history.observe(
        names.iter().map(String::as_str),
        |_| false,
        DEFAULT_WINDOW,
        start,
    );
    history.observe(
        [],
        |name| names.iter().any(|n| n == name),
        DEFAULT_WINDOW,
        now(),
    );
    history
}

#[test]
fn a_handle_made_and_bound_between_two_looks_is_a_bind() {
    let mut history = BindHistory::default();
    let window = TimeDelta::minutes(10);
    history.observe(["a"], |_| false, window, now());
    history.made(&["m".to_owned()]);
    let later = now() + TimeDelta::minutes(1);
    history.observe(["a"], |name| name == "m", window, later);
    assert_eq!(history.binds.len(), 1);
}

#[test]
fn a_history_that_never_looked_keeps_no_names() {
    let mut history = BindHistory::default();
    for i in 0..1000 {
        history.made(&[format!("guid-{i}")]);
    }
    assert_eq!(history, BindHistory::default());
}

#[test]
fn binds_are_handles_seen_unbound_then_bound_and_leave_with_the_window() {
    let mut history = BindHistory::default();
    let window = TimeDelta::minutes(10);
    history.observe(["a", "b", "c"], |_| false, window, now());
    // "x" was never seen unbound (made for a claim): not a bind of the pool's.
    history.observe(
        ["c"],
        |name| ["a", "b", "x"].contains(&name),
        window,
        now() + TimeDelta::minutes(1),
    );
    assert_eq!(history.binds.len(), 2);
    let later = now() + TimeDelta::minutes(1);
    // The whole first window is seen at +10 min, the binds leave it at +11 min.
    assert_eq!(
        history.next_change(window, later),
        Some(now() + TimeDelta::minutes(10))
    );
    let much_later = now() + TimeDelta::minutes(11);
    history.observe(["c"], |name| ["a", "b"].contains(&name), window, much_later);
    assert_eq!(history.binds.len(), 0, "the window moved past them");
    assert_eq!(history.next_change(window, much_later), None);
}

#[test]
fn the_target_is_the_expected_binds_during_one_provisioning_plus_two_deviations() {
    // 60 binds an hour with 10 minutes to provision: 10 expected, 10 + 2√10 = 16.3 → 17.
    let decision = decide(
        &spec(Some(1), 50, None),
        None,
        &history(TimeDelta::hours(2), 60),
        Some((TimeDelta::minutes(10), 5)),
        None,
        now(),
    )
    .expect("valid");
    assert_eq!(decision.status.target, 17);
    assert!(decision.shrink);
    assert!(
        decision.status.reason.starts_with(
            "60 binds in the last 1h and 10m from creation to ready (median of 5 handles): \
             10.0 claims expected"
        ),
        "{}",
        decision.status.reason
    );
}

#[test]
fn the_target_stays_between_min_and_max() {
    let provisioning = Some((TimeDelta::minutes(10), 5));
    let busy = history(TimeDelta::hours(2), 600);
    let capped = decide(
        &spec(None, 20, None),
        None,
        &busy,
        provisioning,
        None,
        now(),
    );
    assert_eq!(capped.expect("valid").status.target, 20);
    let idle = history(TimeDelta::hours(2), 0);
    let floor = decide(
        &spec(None, 20, None),
        Some(3),
        &idle,
        provisioning,
        None,
        now(),
    );
    assert_eq!(
        floor.expect("valid").status.target,
        3,
        "min defaults to minAvailable"
    );
    let unknown = decide(&spec(Some(2), 20, None), None, &busy, None, None, now());
    assert_eq!(unknown.expect("valid").status.target, 2);
}

#[test]
fn a_process_that_has_not_seen_a_whole_window_only_raises_the_target() {
    let provisioning = Some((TimeDelta::minutes(10), 5));
    let young = history(TimeDelta::minutes(5), 0);
    let decision = decide(
        &spec(Some(1), 20, None),
        None,
        &young,
        provisioning,
        Some(8),
        now(),
    )
    .expect("valid");
    assert_eq!(decision.status.target, 8);
    assert!(!decision.shrink);
    assert!(
        decision
            .status
            .reason
            .contains("holding the earlier target 8")
    );
    let old = history(TimeDelta::hours(2), 0);
    let decision = decide(
        &spec(Some(1), 20, None),
        None,
        &old,
        provisioning,
        Some(8),
        now(),
    )
    .expect("valid");
    assert_eq!(decision.status.target, 1);
    assert!(decision.shrink);
}

#[test]
fn a_bad_autoscale_is_a_configuration_problem() {
    let h = BindHistory::default();
    assert_eq!(
        decide(&spec(Some(5), 2, None), None, &h, None, None, now()),
        Err(AutoscaleError::MinAboveMax { min: 5, max: 2 })
    );
    assert!(matches!(
        decide(&spec(None, 2, Some("soon")), None, &h, None, None, now()),
        Err(AutoscaleError::Window(_))
    ));
}

#[test]
fn provisioning_time_is_the_median_from_creation_to_ready() {
    let handle = |created: &str, ready: Option<&str>| -> ResourceHandle {
        let mut value = json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceHandle",
            "metadata": {"name": "h", "namespace": "poolboy", "creationTimestamp": created},
            "spec": {},
        });
        if let Some(ready) = ready {
            value["status"] = json!({"conditions": [{"type": "Ready", "status": "True",
                "reason": "Ready", "message": "", "lastTransitionTime": ready}]});
        }
        serde_json::from_value(value).expect("handle")
    };
    let handles = [
        handle("2026-01-01T00:00:00Z", Some("2026-01-01T00:01:00Z")),
        handle("2026-01-01T00:00:00Z", Some("2026-01-01T00:05:00Z")),
        handle("2026-01-01T00:00:00Z", Some("2026-01-01T00:03:00Z")),
        handle("2026-01-01T00:00:00Z", None),
    ];
    let median = |handles: &[ResourceHandle]| {
        let times: ProvisioningTimes = handles.iter().filter_map(provisioning_time).collect();
        times.median()
    };
    assert_eq!(median(&handles), Some((TimeDelta::minutes(3), 3)));
    assert_eq!(median(&handles[3..]), None);
}

proptest::proptest! {
    /// Whatever the handles that come and go, the kept median is the sorted times' middle one.
    #[test]
    fn the_kept_median_is_that_of_the_times_kept(
        steps in proptest::collection::vec((proptest::bool::ANY, 0i64..20), 0..200)
    ) {
        let mut kept = ProvisioningTimes::default();
        let mut all: Vec<i64> = Vec::new();
        for (insert, seconds) in steps {
            let time = TimeDelta::seconds(seconds);
            if insert {
                kept.insert(time);
                all.push(seconds);
            } else if let Some(at) = all.iter().position(|s| *s == seconds) {
                kept.remove(time);
                all.remove(at);
            }
            all.sort_unstable();
            let expected = all
                .get(all.len() / 2)
                .map(|s| (TimeDelta::seconds(*s), all.len()));
            proptest::prop_assert_eq!(kept.median(), expected);
        }
    }
}

use chrono::TimeDelta;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::core::test_fixtures::{at, now, pool, rfc3339};

fn domain() -> OperatorDomain {
    OperatorDomain::default()
}

/// A scaling of pool `pool` named `name`; `spec` and `status` JSON merged in.
fn scaling(name: &str, spec: Value, status: Value) -> ResourcePoolScaling {
    let mut value = json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourcePoolScaling",
        "metadata": {"name": name, "namespace": "poolboy"},
        "spec": {"count": 3, "resourcePool": {"name": "pool"}},
    });
    if let (Some(target), Value::Object(extra)) = (value["spec"].as_object_mut(), spec) {
        target.extend(extra);
    }
    if !status.is_null() {
        value["status"] = status;
    }
    serde_json::from_value(value).expect("valid scaling")
}

fn the_pool() -> ResourcePool {
    pool("metadata: {name: pool, uid: 0b0e-uid}\nspec: {minAvailable: 1}")
}

fn with_created(mut s: ResourcePoolScaling, timestamp: &str) -> ResourcePoolScaling {
    s.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        timestamp.parse().expect("timestamp"),
    ));
    s
}

#[test]
fn without_at_a_scaling_with_demand_is_active_now() {
    let s = scaling("s", json!({}), Value::Null);
    assert_eq!(is_active(&s, &domain(), now()), Ok(true));
    assert_eq!(remaining(&s), 3);
}

#[test]
fn at_in_the_future_is_not_active_and_at_reached_is() {
    let later = now() + TimeDelta::seconds(30);
    let s = scaling("s", json!({"at": rfc3339(later)}), Value::Null);
    assert_eq!(is_active(&s, &domain(), now()), Ok(false));
    assert_eq!(is_active(&s, &domain(), later), Ok(true));
    assert_eq!(
        is_active(&s, &domain(), later + TimeDelta::hours(1)),
        Ok(true)
    );
}

#[test]
fn a_scaling_whose_count_is_reached_is_not_active() {
    let s = scaling("s", json!({}), json!({"count": 3}));
    assert_eq!(is_active(&s, &domain(), now()), Ok(false));
    assert_eq!(remaining(&s), 0);
    let over = scaling("s", json!({}), json!({"count": 5}));
    assert_eq!(remaining(&over), 0);
    let partly = scaling("s", json!({}), json!({"count": 1}));
    assert_eq!(remaining(&partly), 2);
    assert_eq!(is_active(&partly, &domain(), now()), Ok(true));
}

#[test]
fn a_count_of_zero_is_never_active() {
    let s = scaling("s", json!({"count": 0}), Value::Null);
    assert_eq!(is_active(&s, &domain(), now()), Ok(false));
    // Q7: with an empty status the state is still computable: done.
    assert_eq!(desired_state(&s, now()), Ok(ScalingState::Done));
}

#[test]
fn an_ignored_scaling_is_not_active() {
    let mut s = scaling("s", json!({}), Value::Null);
    s.metadata.labels = Some([(domain().ignore_label(), String::new())].into());
    assert!(domain().ignores(&s.metadata));
    assert_eq!(is_active(&s, &domain(), now()), Ok(false));
}

#[test]
fn a_bad_at_is_an_error_naming_the_field() {
    let s = scaling("s", json!({"at": "tomorrow"}), Value::Null);
    let error = is_active(&s, &domain(), now()).expect_err("bad at");
    assert!(error.to_string().contains("spec.at"), "{error}");
    assert!(error.to_string().contains("tomorrow"), "{error}");
    assert!(desired_state(&s, now()).is_err());
    assert!(next_deadline(&s, now()).is_err());
}

#[test]
fn at_accepts_offsets_and_fractional_seconds() {
    let s = scaling(
        "s",
        json!({"at": "2026-11-21T13:00:00.5+01:00"}),
        Value::Null,
    );
    assert_eq!(
        start(&s),
        Ok(Some(at("2026-11-21T12:00:00.5Z"))),
        "converted to UTC"
    );
    assert_eq!(is_active(&s, &domain(), now()), Ok(false));
}

#[test]
fn the_state_is_waiting_then_scaling_then_done() {
    let later = now() + TimeDelta::minutes(5);
    let waiting = scaling("s", json!({"at": rfc3339(later)}), Value::Null);
    assert_eq!(desired_state(&waiting, now()), Ok(ScalingState::Waiting));
    assert_eq!(desired_state(&waiting, later), Ok(ScalingState::Scaling));
    let partly = scaling("s", json!({}), json!({"count": 2}));
    assert_eq!(desired_state(&partly, now()), Ok(ScalingState::Scaling));
    let done = scaling("s", json!({}), json!({"count": 3}));
    assert_eq!(desired_state(&done, now()), Ok(ScalingState::Done));
    // Q7: Poolboy writes `scaling` only when the count is *past* spec.count.
    assert_eq!(state_for(&partly, 3, now()), Ok(ScalingState::Done));
    assert_eq!(state_for(&partly, 1, now()), Ok(ScalingState::Scaling));
}

#[test]
fn the_next_deadline_is_at_while_ahead() {
    let later = now() + TimeDelta::minutes(5);
    let s = scaling("s", json!({"at": rfc3339(later)}), Value::Null);
    assert_eq!(next_deadline(&s, now()), Ok(Some(later)));
    assert_eq!(next_deadline(&s, later), Ok(None));
    assert_eq!(
        next_deadline(&scaling("s", json!({}), Value::Null), now()),
        Ok(None)
    );
}

#[test]
fn a_pool_consumes_its_oldest_active_scaling_then_by_name() {
    let p = the_pool();
    let scalings = vec![
        with_created(
            scaling("young", json!({}), Value::Null),
            "2026-11-21T11:00:00Z",
        ),
        with_created(
            scaling("b-old", json!({}), Value::Null),
            "2026-11-21T10:00:00Z",
        ),
        with_created(
            scaling("a-old", json!({}), Value::Null),
            "2026-11-21T10:00:00Z",
        ),
        with_created(
            scaling("oldest-done", json!({}), json!({"count": 3})),
            "2026-11-21T09:00:00Z",
        ),
        with_created(
            scaling(
                "other-pool",
                json!({"resourcePool": {"name": "other"}}),
                Value::Null,
            ),
            "2026-11-21T08:00:00Z",
        ),
        with_created(
            scaling(
                "waiting",
                json!({"at": "2026-11-21T13:00:00Z"}),
                Value::Null,
            ),
            "2026-11-21T08:00:00Z",
        ),
        with_created(
            scaling("broken", json!({"at": "soon"}), Value::Null),
            "2026-11-21T08:00:00Z",
        ),
    ];
    let active: Vec<String> = active_scalings_of_pool(&scalings, &p, &domain(), now())
        .into_iter()
        .map(|s| s.name_any())
        .collect();
    assert_eq!(active, ["a-old", "b-old", "young"]);
}

#[test]
fn a_scaling_in_another_namespace_is_not_the_pools() {
    let mut s = scaling("s", json!({}), Value::Null);
    s.metadata.namespace = Some("elsewhere".into());
    assert!(!is_scaling_of_pool(&s, &the_pool()));
    assert!(is_scaling_of_pool(
        &scaling("s", json!({}), Value::Null),
        &the_pool()
    ));
}

#[test]
fn only_the_scalings_demand_is_attributed_to_it() {
    assert_eq!(attributed(5, 2), 2);
    assert_eq!(attributed(2, 5), 2);
    assert_eq!(attributed(3, 0), 0);
    assert_eq!(attributed(0, 3), 0);
}

#[test]
fn a_decrement_never_goes_below_zero() {
    assert_eq!(decremented(3, 1), 2);
    assert_eq!(decremented(1, 1), 0);
    assert_eq!(decremented(0, 1), 0);
    assert_eq!(decremented(2, 5), 0);
}

#[test]
fn the_count_patch_tests_the_old_count() {
    let s = scaling("s", json!({}), json!({"count": 1, "state": "scaling"}));
    let patch = serde_json::to_value(count_patch(&s, 3, now())).expect("json");
    assert_eq!(
        patch,
        json!([
            {"op": "test", "path": "/status/count", "value": 1},
            {"op": "add", "path": "/status/count", "value": 3},
            {"op": "add", "path": "/status/state", "value": "done"},
        ])
    );
    let partial = count_patch(&s, 2, now());
    assert_eq!(
        serde_json::to_value(partial).expect("json")[2]["value"],
        "scaling"
    );
}

#[test]
fn the_count_patch_tests_a_missing_status_or_count_as_null() {
    let empty = scaling("s", json!({}), Value::Null);
    let patch = serde_json::to_value(count_patch(&empty, 2, now())).expect("json");
    assert_eq!(
        patch,
        json!([
            {"op": "test", "path": "/status", "value": null},
            {"op": "add", "path": "/status", "value": {"count": 2, "state": "scaling"}},
        ])
    );
    let no_count = scaling("s", json!({}), json!({"state": "done"}));
    let patch = serde_json::to_value(count_patch(&no_count, 1, now())).expect("json");
    assert_eq!(
        patch[0],
        json!({"op": "test", "path": "/status/count", "value": null})
    );
}

#[test]
fn the_count_patch_leaves_the_state_alone_when_at_is_bad() {
    let s = scaling("s", json!({"at": "soon"}), json!({"count": 2}));
    assert_eq!(
        serde_json::to_value(count_patch(&s, 1, now())).expect("json"),
        json!([
            {"op": "test", "path": "/status/count", "value": 2},
            {"op": "add", "path": "/status/count", "value": 1},
        ])
    );
}

#[test]
fn the_state_patch_is_guarded_by_the_count_and_works_without_a_status() {
    let empty = scaling("s", json!({"count": 0}), Value::Null);
    assert_eq!(
        serde_json::to_value(state_patch(&empty, ScalingState::Done)).expect("json"),
        json!([
            {"op": "test", "path": "/status", "value": null},
            {"op": "add", "path": "/status", "value": {"state": "done"}},
        ])
    );
    let counted = scaling("s", json!({}), json!({"count": 2}));
    assert_eq!(
        serde_json::to_value(state_patch(&counted, ScalingState::Scaling)).expect("json"),
        json!([
            {"op": "test", "path": "/status/count", "value": 2},
            {"op": "add", "path": "/status/state", "value": "scaling"},
        ])
    );
}

fn reference(kind: &str, name: &str, uid: &str, controller: Option<bool>) -> OwnerReference {
    OwnerReference {
        api_version: "poolboy.gpte.redhat.com/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller,
        block_owner_deletion: None,
    }
}

#[test]
fn the_pool_becomes_the_controlling_owner() {
    let p = the_pool();
    let api_version = "poolboy.gpte.redhat.com/v1";
    let wanted = reference("ResourcePool", "pool", "0b0e-uid", Some(true));
    assert_eq!(
        owner_references(&[], &p, api_version),
        Some(vec![wanted.clone()])
    );
    assert_eq!(
        owner_references(std::slice::from_ref(&wanted), &p, api_version),
        None
    );
    // A reference to a pool of the same name that was deleted and created again is replaced.
    let stale = reference("ResourcePool", "pool", "old-uid", Some(true));
    assert_eq!(
        owner_references(&[stale], &p, api_version),
        Some(vec![wanted.clone()])
    );
    // Other, non-controlling owners are kept.
    let other = reference("ConfigMap", "keep", "cm-uid", None);
    assert_eq!(
        owner_references(std::slice::from_ref(&other), &p, api_version),
        Some(vec![wanted.clone(), other.clone()])
    );
    assert_eq!(owner_references(&[wanted, other], &p, api_version), None);
}

proptest! {
    /// The pool never creates more for a scaling than it still wants, and the count written
    /// after creating the attributed handles never passes spec.count.
    #[test]
    fn creation_never_passes_the_scalings_count(
        count in 0i64..50, created in 0i64..60, create in 0usize..80,
    ) {
        let s = scaling("s", json!({"count": count}), json!({"count": created}));
        let given = attributed(create, remaining(&s));
        prop_assert!(given <= create);
        let after = super::created(&s) + i64::try_from(given).unwrap_or(i64::MAX);
        prop_assert!(after <= count.max(created));
        let state = state_for(&s, after, now()).expect("no at");
        prop_assert_eq!(state == ScalingState::Done, after >= count);
    }

    /// Active exactly when the scaling has started and its count is not reached.
    #[test]
    fn activity_follows_time_and_counts(
        count in 0i64..10, created in 0i64..12, offset in -100i64..100,
    ) {
        let start_at = now() + TimeDelta::seconds(offset);
        let s = scaling(
            "s", json!({"count": count, "at": rfc3339(start_at)}), json!({"count": created}),
        );
        let active = is_active(&s, &domain(), now()).expect("valid at");
        prop_assert_eq!(active, offset <= 0 && count > created);
        let waiting = desired_state(&s, now()).expect("valid at") == ScalingState::Waiting;
        prop_assert_eq!(waiting, offset > 0);
    }
}

#[test]
fn a_scaling_reports_a_problem_and_its_end_in_its_valid_condition() {
    let fine = scaling("s", json!({}), json!({"count": 1}));
    let (conditions, change) = validity_conditions(&fine, None, now());
    assert_eq!(change, crate::core::conditions::Change::Unchanged);
    assert!(conditions.is_empty());

    let (conditions, change) =
        validity_conditions(&fine, Some("spec.at: bad"), at("2026-11-21T11:00:00Z"));
    assert_eq!(change, crate::core::conditions::Change::Transitioned);
    let broken = scaling(
        "s",
        json!({}),
        json!({"count": 1, "conditions": conditions}),
    );
    let (conditions, change) = validity_conditions(&broken, None, now());
    assert_eq!(change, crate::core::conditions::Change::Transitioned);
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0].status, "True");
    assert_eq!(
        conditions[0].last_transition_time,
        crate::core::lifespan::api_time(now())
    );
}

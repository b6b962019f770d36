use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::*;
use crate::core::test_fixtures::{at, now};

fn valid(status: ConditionStatus, message: &str) -> DesiredCondition {
    DesiredCondition {
        type_: VALID,
        status,
        reason: if status == ConditionStatus::True {
            "Valid"
        } else {
            "Invalid"
        },
        message: message.to_owned(),
        observed_generation: Some(1),
    }
}

/// The conditions after setting `desired` at `earlier`: one `Valid` condition.
fn set_at(earlier: &str, desired: DesiredCondition) -> Vec<Condition> {
    let mut conditions = Vec::new();
    set_condition(&mut conditions, desired, at(earlier));
    conditions
}

fn transition(conditions: &[Condition], type_: &str) -> String {
    let condition = find(conditions, type_).expect("the condition is set");
    condition.last_transition_time.0.to_string()
}

#[test]
fn a_new_condition_transitions_now_in_whole_seconds() {
    let mut conditions = Vec::new();
    let change = set_condition(
        &mut conditions,
        valid(ConditionStatus::True, "fine"),
        at("2026-11-21T12:00:00.750Z"),
    );
    assert_eq!(change, Change::Transitioned);
    assert_eq!(transition(&conditions, VALID), "2026-11-21T12:00:00Z");
    assert_eq!(conditions[0].status, "True");
    assert_eq!(conditions[0].reason, "Valid");
    assert_eq!(conditions[0].message, "fine");
    assert_eq!(conditions[0].observed_generation, Some(1));
}

#[test]
fn a_status_flip_moves_the_transition_time() {
    let mut conditions = set_at("2026-11-21T11:00:00Z", valid(ConditionStatus::True, "fine"));
    let change = set_condition(
        &mut conditions,
        valid(ConditionStatus::False, "broken"),
        now(),
    );
    assert_eq!(change, Change::Transitioned);
    assert_eq!(transition(&conditions, VALID), "2026-11-21T12:00:00Z");
    assert_eq!(conditions[0].status, "False");
    assert_eq!(conditions[0].reason, "Invalid");
    assert_eq!(conditions[0].message, "broken");
}

#[test]
fn a_new_message_keeps_the_transition_time() {
    let mut conditions = set_at(
        "2026-11-21T11:00:00Z",
        valid(ConditionStatus::False, "provider a is missing"),
    );
    let change = set_condition(
        &mut conditions,
        valid(ConditionStatus::False, "provider b is missing"),
        now(),
    );
    assert_eq!(change, Change::Reworded);
    assert!(change.is_news());
    assert_eq!(transition(&conditions, VALID), "2026-11-21T11:00:00Z");
    assert_eq!(conditions[0].message, "provider b is missing");
}

#[test]
fn a_new_reason_or_generation_keeps_the_transition_time_and_is_no_news() {
    let mut conditions = set_at("2026-11-21T11:00:00Z", valid(ConditionStatus::True, "fine"));
    let mut desired = valid(ConditionStatus::True, "fine");
    desired.reason = "Compiled";
    desired.observed_generation = Some(2);
    let change = set_condition(&mut conditions, desired, now());
    assert_eq!(change, Change::Refreshed);
    assert!(!change.is_news());
    assert_eq!(transition(&conditions, VALID), "2026-11-21T11:00:00Z");
    assert_eq!(conditions[0].reason, "Compiled");
    assert_eq!(conditions[0].observed_generation, Some(2));
}

#[test]
fn an_unchanged_condition_is_a_no_op() {
    let mut conditions = set_at("2026-11-21T11:00:00Z", valid(ConditionStatus::True, "fine"));
    let before = conditions.clone();
    let change = set_condition(&mut conditions, valid(ConditionStatus::True, "fine"), now());
    assert_eq!(change, Change::Unchanged);
    assert!(!change.is_news());
    assert_eq!(conditions, before);
}

#[test]
fn other_conditions_are_left_alone() {
    let mut conditions = set_at("2026-11-21T11:00:00Z", valid(ConditionStatus::True, "fine"));
    let ready = DesiredCondition {
        type_: READY,
        status: ConditionStatus::Unknown,
        reason: "NoResources",
        message: "no resources".to_owned(),
        observed_generation: None,
    };
    assert_eq!(
        set_condition(&mut conditions, ready, now()),
        Change::Transitioned
    );
    assert_eq!(conditions.len(), 2);
    assert_eq!(conditions[1].status, "Unknown");
    assert_eq!(transition(&conditions, VALID), "2026-11-21T11:00:00Z");
    assert_eq!(transition(&conditions, READY), "2026-11-21T12:00:00Z");
}

#[test]
fn configuration_validity_is_absent_until_there_is_a_problem() {
    let mut conditions = Vec::new();
    let change = set_configuration_validity(&mut conditions, None, Some(1), now());
    assert_eq!(change, Change::Unchanged);
    assert!(conditions.is_empty());
}

#[test]
fn configuration_validity_reports_a_problem_then_its_end() {
    let mut conditions = Vec::new();
    let reported = set_configuration_validity(
        &mut conditions,
        Some("spec.provider.name: a is missing"),
        Some(1),
        at("2026-11-21T11:00:00Z"),
    );
    assert_eq!(reported, Change::Transitioned);
    assert_eq!(
        problem(Some(&conditions), VALID),
        Some("spec.provider.name: a is missing")
    );
    assert_eq!(conditions[0].reason, "InvalidConfiguration");

    let reworded = set_configuration_validity(
        &mut conditions,
        Some("spec.provider.name: b is missing"),
        Some(2),
        at("2026-11-21T11:30:00Z"),
    );
    assert_eq!(reworded, Change::Reworded);
    assert_eq!(transition(&conditions, VALID), "2026-11-21T11:00:00Z");

    let solved = set_configuration_validity(&mut conditions, None, Some(3), now());
    assert_eq!(solved, Change::Transitioned);
    assert_eq!(problem(Some(&conditions), VALID), None);
    assert_eq!(conditions[0].status, "True");
    assert_eq!(conditions[0].reason, "Valid");
    assert_eq!(conditions[0].message, "");
    assert_eq!(transition(&conditions, VALID), "2026-11-21T12:00:00Z");
}

#[test]
fn a_problem_is_the_message_of_a_false_condition() {
    let broken = set_at(
        "2026-11-21T11:00:00Z",
        valid(ConditionStatus::False, "broken"),
    );
    assert_eq!(problem(Some(&broken), VALID), Some("broken"));
    assert_eq!(problem(Some(&broken), READY), None);
    let fine = set_at("2026-11-21T11:00:00Z", valid(ConditionStatus::True, "fine"));
    assert_eq!(problem(Some(&fine), VALID), None);
    assert_eq!(problem(None, VALID), None);
}

#[test]
fn an_undecodable_object_is_invalid_once_per_problem_and_keeps_its_other_conditions() {
    let mut conditions = set_at("2026-01-01T00:00:00Z", valid(ConditionStatus::True, ""));
    conditions.push(Condition {
        type_: BOUND.to_owned(),
        status: "True".to_owned(),
        reason: "Bound".to_owned(),
        message: String::new(),
        observed_generation: None,
        last_transition_time: conditions[0].last_transition_time.clone(),
    });
    let problem = "JSON nested deeper than 125 levels at /spec/…";
    let change = set_undecodable(&mut conditions, problem, Some(3), now());
    assert_eq!(change, Change::Transitioned);
    let valid = find(&conditions, VALID).expect("Valid");
    assert_eq!(
        (
            valid.status.as_str(),
            valid.reason.as_str(),
            valid.message.as_str()
        ),
        ("False", UNDECODABLE, problem)
    );
    assert_eq!(valid.observed_generation, Some(3));
    assert!(find(&conditions, BOUND).is_some());
    assert_eq!(
        set_undecodable(&mut conditions, problem, Some(3), now()),
        Change::Unchanged
    );
}

#[test]
fn a_milestone_is_a_condition_that_became_true() {
    let falsy = set_at("2026-11-24T10:00:00Z", valid(ConditionStatus::False, "no"));
    let truthy = set_at("2026-11-24T10:00:00Z", valid(ConditionStatus::True, "yes"));
    assert!(became_true(None, Some(&truthy), VALID));
    assert!(became_true(Some(&falsy), Some(&truthy), VALID));
    assert!(!became_true(Some(&truthy), Some(&truthy), VALID));
    assert!(!became_true(Some(&truthy), Some(&falsy), VALID));
    assert!(!became_true(None, Some(&truthy), READY));
}

use serde_json::{Value, json};

use super::*;
use crate::api::refs::{ResourceReference, WaitingFor};
use crate::core::handle::plan::tests::{Fixture, configmap_provider, handle};
use crate::core::test_fixtures::{now, provider_with_spec};

fn reference(name: &str) -> ResourceReference {
    ResourceReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: name.into(),
        namespace: Some("managed".into()),
    }
}

fn apply(name: &str) -> ResourcePlan {
    ResourcePlan::Apply {
        definition: json!({}),
        reference: reference(name),
    }
}

fn compute(
    fixture: &Fixture,
    handle: &ResourceHandle,
    plans: &[ResourcePlan],
    states: &[Option<Value>],
) -> DesiredStatus {
    let providers = fixture.providers(handle);
    let summary_provider =
        summary_provider_name(handle).and_then(|n| fixture.catalog.get(n).ok().cloned());
    desired_status(
        &fixture.env(),
        &StatusInput {
            handle,
            providers: &providers,
            summary_provider: summary_provider.as_deref(),
            plans,
            states,
            problems: &[],
            apply_failures: &[],
        },
    )
}

fn checked_provider() -> crate::api::ResourceProvider {
    configmap_provider(
        "cm",
        json!({
            "vars": {"wanted": "yes"},
            "healthCheck": "metadata.labels.broken | default('no') != 'yes'",
            "readinessCheck": "data.ready == wanted and resource_handle.metadata.name == 'guid-abcde'",
        }),
    )
}

fn state(ready: &str, broken: &str) -> Option<Value> {
    Some(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "guid0-abcde", "labels": {"broken": broken}},
        "data": {"ready": ready},
    }))
}

#[test]
fn entries_follow_the_spec_keep_references_and_record_waiting() {
    let fixture = Fixture::new(vec![checked_provider()]);
    let mut handle = handle(&[("a", "cm", json!({})), ("b", "cm", json!({}))]);
    handle.status = Some(
        serde_json::from_value(json!({"resources": [
            {"name": "old", "reference": reference("pinned"), "waitingFor": "ResourceClaim"},
            {},
            {"name": "extra"},
        ]}))
        .expect("status"),
    );
    let plans = [
        apply("new-name"),
        ResourcePlan::WaitingForLink {
            linked_provider: "a".into(),
        },
    ];
    let desired = compute(&fixture, &handle, &plans, &[None, None]);
    let resources = desired.status.resources.expect("resources");
    assert_eq!(resources.len(), 2, "one entry per spec entry");
    assert_eq!(resources[0].name.as_deref(), Some("a"));
    assert_eq!(resources[0].reference, Some(reference("pinned")));
    assert_eq!(resources[0].waiting_for, None);
    assert_eq!(resources[1].name.as_deref(), Some("b"));
    assert_eq!(resources[1].reference, None);
    assert_eq!(
        resources[1].waiting_for,
        Some(WaitingFor::LinkedResourceProvider)
    );
}

#[test]
fn health_and_readiness_come_from_the_checks_over_the_live_object() {
    let fixture = Fixture::new(vec![checked_provider()]);
    let handle = handle(&[("a", "cm", json!({}))]);
    let plans = [apply("guid0-abcde")];

    let ready = compute(&fixture, &handle, &plans, &[state("yes", "no")]).status;
    let resource = &ready.resources.as_ref().expect("resources")[0];
    assert_eq!((resource.healthy, resource.ready), (Some(true), Some(true)));
    assert_eq!((ready.healthy, ready.ready), (Some(true), Some(true)));

    let not_ready = compute(&fixture, &handle, &plans, &[state("no", "no")]).status;
    assert_eq!(
        (not_ready.healthy, not_ready.ready),
        (Some(true), Some(false))
    );

    // Unhealthy means not ready, whatever the readiness check says.
    let unhealthy = compute(&fixture, &handle, &plans, &[state("yes", "yes")]).status;
    assert_eq!(
        (unhealthy.healthy, unhealthy.ready),
        (Some(false), Some(false))
    );

    // No live object: health unknown, not ready.
    let absent = compute(&fixture, &handle, &plans, &[None]).status;
    let resource = &absent.resources.as_ref().expect("resources")[0];
    assert_eq!((resource.healthy, resource.ready), (None, Some(false)));
    assert_eq!((absent.healthy, absent.ready), (None, Some(false)));
}

#[test]
fn a_failing_or_missing_check_is_unknown() {
    let fixture = Fixture::new(vec![
        configmap_provider("nochecks", json!({})),
        configmap_provider(
            "broken",
            json!({"readinessCheck": "data.x.y.z | int > 'a'"}),
        ),
    ]);
    let handle = handle(&[("a", "nochecks", json!({})), ("b", "broken", json!({}))]);
    let desired = compute(
        &fixture,
        &handle,
        &[apply("a"), apply("b")],
        &[state("yes", "no"), state("yes", "no")],
    );
    let resources = desired.status.resources.expect("resources");
    assert_eq!((resources[0].healthy, resources[0].ready), (None, None));
    assert_eq!((resources[1].healthy, resources[1].ready), (None, None));
    assert_eq!(desired.failures.len(), 1, "{:?}", desired.failures);
    assert!(desired.failures[0].contains("ResourceProvider broken readinessCheck failed"));
    assert_eq!((desired.status.healthy, desired.status.ready), (None, None));
}

#[test]
fn without_a_readiness_check_the_ready_condition_reads_the_resource_itself() {
    let fixture = Fixture::new(vec![
        configmap_provider("nochecks", json!({})),
        checked_provider(),
    ]);
    let ready_condition = |status: &ResourceHandleStatus| {
        let conditions = status.conditions.as_ref().expect("conditions");
        let ready = conditions.iter().find(|c| c.type_ == READY).expect("Ready");
        (
            ready.status.clone(),
            ready.reason.clone(),
            ready.message.clone(),
        )
    };

    // A ConfigMap is ready once it exists; Poolboy's `ready` stays unset without a check.
    let handle_value = handle(&[("a", "nochecks", json!({}))]);
    let status = compute(&fixture, &handle_value, &[apply("a")], &[state("no", "no")]).status;
    assert_eq!(status.ready, None);
    assert_eq!(status.resources.as_ref().expect("resources")[0].ready, None);
    assert_eq!(
        ready_condition(&status),
        (
            "True".into(),
            "ResourcesReady".into(),
            "every resource is ready".into()
        )
    );

    // A kind with a status is ready by it.
    let rolling = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "a", "generation": 1},
        "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1}});
    let status = compute(&fixture, &handle_value, &[apply("a")], &[Some(rolling)]).status;
    assert_eq!(status.ready, None);
    assert_eq!(
        ready_condition(&status),
        (
            "False".into(),
            "ResourcesNotReady".into(),
            "a: 0 of 1 replicas available".into()
        )
    );

    // A provider's readinessCheck wins over the resource's own status.
    let checked = handle(&[("a", "nochecks", json!({})), ("b", "cm", json!({}))]);
    let status = compute(
        &fixture,
        &checked,
        &[apply("a"), apply("b")],
        &[state("no", "no"), state("no", "no")],
    )
    .status;
    assert_eq!(status.ready, Some(false));
    assert_eq!(
        ready_condition(&status),
        (
            "False".into(),
            "ResourcesNotReady".into(),
            "b: not ready".into()
        )
    );
}

#[test]
fn the_overall_rule_is_false_then_unknown_then_true() {
    assert_eq!(
        overall([Some(true), None, Some(false)].into_iter()),
        Some(false)
    );
    assert_eq!(overall([Some(true), None].into_iter()), None);
    assert_eq!(overall([Some(true), Some(true)].into_iter()), Some(true));
    assert_eq!(overall(std::iter::empty()), None, "nothing is unknown");
}

#[test]
fn the_summary_comes_from_spec_provider_else_the_last_resources_provider() {
    let summary_provider = |name: &str, text: &str| {
        configmap_provider(
            name,
            json!({
                "vars": {"greeting": "hi"},
                "statusSummaryTemplate": {
                    "text": text,
                    "state": "{{ resources[0].state.data.ready | default('none') }}",
                },
            }),
        )
    };
    let fixture = Fixture::new(vec![
        summary_provider("first", "{{ greeting }} first"),
        summary_provider(
            "last",
            "{{ greeting }} last {{ resource_handle.metadata.name }}",
        ),
        provider_with_spec(
            "top",
            json!({"statusSummaryTemplate": {"size": "{{ size }}"}}),
        ),
    ]);
    let two = handle(&[("a", "first", json!({})), ("b", "last", json!({}))]);
    let desired = compute(&fixture, &two, &[], &[state("yes", "no"), None]).status;
    assert_eq!(
        desired.summary,
        Some(json!({"text": "hi last guid-abcde", "state": "yes"}))
    );

    let mut with_provider = two.clone();
    with_provider.spec.provider = Some(
        serde_json::from_value(json!({"name": "top", "parameterValues": {"size": 3}}))
            .expect("provider"),
    );
    let desired = compute(&fixture, &with_provider, &[], &[None, None]).status;
    assert_eq!(desired.summary, Some(json!({"size": "3"})));
}

#[test]
fn the_summary_provider_is_spec_provider_else_the_last_resources() {
    let mut two = handle(&[("a", "first", json!({})), ("b", "last", json!({}))]);
    assert_eq!(summary_provider_name(&two), Some("last"));
    two.spec.provider =
        Some(serde_json::from_value(json!({"name": "top"})).expect("a provider reference"));
    assert_eq!(summary_provider_name(&two), Some("top"));
    assert_eq!(summary_provider_name(&handle(&[])), None);
}

#[test]
fn a_failed_summary_leaves_the_current_one() {
    let fixture = Fixture::new(vec![configmap_provider(
        "cm",
        json!({"statusSummaryTemplate": {"x": "{{ missing }}"}}),
    )]);
    let mut handle = handle(&[("a", "cm", json!({}))]);
    handle.status =
        Some(serde_json::from_value(json!({"summary": {"old": true}})).expect("status"));
    let desired = compute(&fixture, &handle, &[], &[None]);
    assert_eq!(desired.status.summary, Some(json!({"old": true})));
    assert!(desired.failures[0].contains("statusSummaryTemplate failed"));
}

#[test]
fn conditions_report_readiness_and_problems_and_keep_their_transition_time() {
    let fixture = Fixture::new(vec![checked_provider()]);
    let handle_value = handle(&[("a", "cm", json!({})), ("b", "cm", json!({}))]);
    let plans = [
        ResourcePlan::Invalid("spec.resources[0] (a): broken".into()),
        apply("b"),
    ];
    let first = compute(&fixture, &handle_value, &plans, &[None, state("no", "no")]).status;
    let conditions = first.conditions.clone().expect("conditions");
    let ready = conditions.iter().find(|c| c.type_ == READY).expect("Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(
        ready.message,
        "a: invalid definition: spec.resources[0] (a): broken; b: not ready"
    );
    let valid = conditions.iter().find(|c| c.type_ == VALID).expect("Valid");
    assert_eq!(valid.status, "False");
    assert_eq!(valid.message, "spec.resources[0] (a): broken");
    assert_eq!(
        problem_message(Some(&first)),
        Some("spec.resources[0] (a): broken")
    );
    assert_eq!(
        first.resources.as_ref().expect("resources")[0].waiting_for,
        Some(WaitingFor::ResourceDefinition)
    );

    // A later reconcile with the same outcome changes nothing, transition times included.
    let mut later = handle_value.clone();
    later.status = Some(first.clone());
    let fixture_later = fixture;
    let later_now = now_plus_hour();
    let providers = fixture_later.providers(&later);
    let again = {
        let mut env = fixture_later.env();
        env.now = later_now;
        env.render_at = later_now;
        desired_status(
            &env,
            &StatusInput {
                handle: &later,
                providers: &providers,
                summary_provider: None,
                plans: &plans,
                states: &[None, state("no", "no")],
                problems: &[],
                apply_failures: &[],
            },
        )
        .status
    };
    assert_eq!(again, first);
    assert!(status_patch(Some(&first), &again).is_empty());
}

fn now_plus_hour() -> chrono::DateTime<chrono::Utc> {
    now() + chrono::TimeDelta::hours(1)
}

#[test]
fn the_status_patch_touches_only_fields_that_differ() {
    let current: ResourceHandleStatus = serde_json::from_value(json!({
        "healthy": true,
        "ready": false,
        "summary": {"a": 1},
        "resources": [{"name": "a"}],
    }))
    .expect("status");
    let mut desired = current.clone();
    desired.healthy = None;
    desired.ready = Some(true);
    let ops = serde_json::to_value(status_patch(Some(&current), &desired)).expect("ops");
    assert_eq!(
        ops,
        json!([
            {"op": "remove", "path": "/status/healthy"},
            {"op": "add", "path": "/status/ready", "value": true},
        ])
    );
    assert!(status_patch(Some(&current), &current).is_empty());
    let ops = serde_json::to_value(status_patch(None, &desired)).expect("ops");
    assert_eq!(ops[0]["op"], "add");
    assert_eq!(ops[0]["path"], "/status");
    assert_eq!(ops[0]["value"]["ready"], true);
}

#[test]
fn a_resource_the_api_server_refuses_sets_the_ready_reason_and_says_why() {
    let fixture = Fixture::new(vec![checked_provider()]);
    let handle = handle(&[("a", "cm", json!({})), ("b", "cm", json!({}))]);
    let providers = fixture.providers(&handle);
    let failures = [ApplyFailure {
        index: 0,
        reason: ApplyFailureReason::of_status(403),
        message: "configmaps is forbidden".to_owned(),
    }];
    let desired = desired_status(
        &fixture.env(),
        &StatusInput {
            handle: &handle,
            providers: &providers,
            summary_provider: None,
            plans: &[apply("a"), apply("b")],
            states: &[None, state("no", "no")],
            problems: &[],
            apply_failures: &failures,
        },
    );
    let conditions = desired.status.conditions.expect("conditions");
    let ready = conditions.iter().find(|c| c.type_ == READY).expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "Forbidden")
    );
    assert_eq!(ready.message, "a: configmaps is forbidden; b: not ready");
    // Bad input it is not: Valid stays True.
    let valid = conditions.iter().find(|c| c.type_ == VALID).expect("Valid");
    assert_eq!(valid.status, "True");
    assert_eq!(
        ApplyFailureReason::of_status(422).as_str(),
        "ResourceRefused"
    );
    assert_eq!(
        ApplyFailureReason::of_status(503).as_str(),
        "ResourceFailed"
    );
}

#[test]
fn names_alone_wait_for_the_next_write_and_ride_along_with_it() {
    let current: ResourceHandleStatus = serde_json::from_value(json!({
        "ready": true,
        "resources": [{"ready": true, "reference": {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}}],
    }))
    .expect("status");
    let mut named = current.clone();
    if let Some(resource) = named.resources.as_mut().and_then(|r| r.first_mut()) {
        resource.name = Some("config".to_owned());
    }
    assert!(status_patch(Some(&current), &named).is_empty());

    let mut named_and_not_ready = named.clone();
    named_and_not_ready.ready = Some(false);
    let ops =
        serde_json::to_value(status_patch(Some(&current), &named_and_not_ready)).expect("ops");
    assert_eq!(
        ops,
        json!([
            {"op": "add", "path": "/status/resources", "value": [{"name": "config", "ready": true,
                "reference": {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}}]},
            {"op": "add", "path": "/status/ready", "value": false},
        ])
    );

    let mut one_more = named.clone();
    one_more
        .resources
        .get_or_insert_with(Vec::new)
        .push(Default::default());
    assert!(!status_patch(Some(&current), &one_more).is_empty());
}

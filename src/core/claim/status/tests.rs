use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::*;
use crate::api::claim::ApprovalState;
use crate::core::test_fixtures::{at, now, provider_ref};

fn later() -> DateTime<Utc> {
    at("2026-11-21T13:00:00Z")
}

fn domain() -> OperatorDomain {
    OperatorDomain::default()
}

fn handle(status: Value) -> ResourceHandle {
    serde_json::from_value(json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceHandle",
        "metadata": {"name": "guid-abcde", "namespace": "poolboy"},
        "spec": {"resources": [
            {"provider": provider_ref("a")},
            {"provider": provider_ref("b")},
        ]},
        "status": status,
    }))
    .expect("valid handle")
}

fn status(value: Value) -> ResourceClaimStatus {
    serde_json::from_value(value).expect("valid status")
}

fn input<'a>(binding: Binding<'a>, domain: &'a OperatorDomain) -> StatusInput<'a> {
    StatusInput {
        validity: Validity::Valid,
        provider: None,
        resources: None,
        approval: None,
        binding,
        generation: Some(3),
        domain,
        now: now(),
        wait: None,
    }
}

fn lifespan() -> ClaimStatusLifespan {
    ClaimStatusLifespan {
        start: Some("2026-11-21T12:00:00Z".to_owned()),
        end: Some("2026-11-21T14:00:00Z".to_owned()),
        ..Default::default()
    }
}

fn live_config_map() -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "cm", "namespace": "x", "uid": "u", "resourceVersion": "7", "generation": 2,
            "managedFields": [{"manager": "poolboy"}],
            "annotations": {"poolboy.gpte.redhat.com/resource-handle-name": "guid-abcde"},
        },
        "data": {"k": "v"},
        "status": {"diffBase": "{}", "phase": "ok"},
    })
}

#[test]
fn pruning_drops_bookkeeping_and_keeps_the_rest() {
    let pruned = pruned_state(&live_config_map(), &domain());
    assert_eq!(
        pruned,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "x", "uid": "u", "resourceVersion": "7"},
            "data": {"k": "v"},
            "status": {"phase": "ok"},
        })
    );
    let mut other = live_config_map();
    other["metadata"]["annotations"]["team"] = json!("blue");
    let pruned = pruned_state(&other, &domain());
    assert_eq!(pruned["metadata"]["annotations"], json!({"team": "blue"}));
}

#[test]
fn a_bound_claim_mirrors_its_handle() {
    let domain = domain();
    let handle = handle(json!({
        "healthy": true, "ready": false, "summary": {"url": "https://x"},
        "resources": [
            {"name": "first", "healthy": true, "ready": false, "waitingFor": "ResourceClaim",
             "reference": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "namespace": "x"}},
        ],
    }));
    let states = [Some(live_config_map()), None];
    let binding = Binding::Bound(BoundHandle {
        handle: &handle,
        states: &states,
        lifespan: Some(lifespan()),
        lifespan_ending: None,
    });
    let desired = desired_claim_status(None, &input(binding, &domain));
    let handle_ref = desired.resource_handle.as_ref().expect("bound");
    assert_eq!(handle_ref.name, "guid-abcde");
    assert_eq!(handle_ref.namespace, "poolboy");
    assert_eq!(handle_ref.kind, "ResourceHandle");
    assert_eq!(handle_ref.api_version, "poolboy.gpte.redhat.com/v1");
    assert_eq!(desired.healthy, Some(true));
    assert_eq!(desired.ready, Some(false));
    assert_eq!(desired.summary, Some(json!({"url": "https://x"})));
    assert_eq!(desired.lifespan, Some(lifespan()));
    let resources = desired.resources.as_ref().expect("resources");
    // One entry per handle resource, the second without status yet.
    assert_eq!(resources.len(), 2);
    assert_eq!(resources[0].name.as_deref(), Some("first"));
    assert_eq!(
        resources[0].waiting_for,
        Some(crate::api::refs::WaitingFor::ResourceClaim)
    );
    assert_eq!(
        resources[0].provider.as_ref().map(|p| p.name.as_str()),
        Some("a")
    );
    assert_eq!(
        resources[0]
            .state
            .as_ref()
            .map(|s| s["metadata"].get("managedFields").is_none()),
        Some(true)
    );
    assert_eq!(
        resources[1].provider.as_ref().map(|p| p.name.as_str()),
        Some("b")
    );
    assert_eq!(resources[1].state, None);

    // Health the handle no longer reports is removed from the claim.
    let quiet = self::handle(json!({}));
    let binding = Binding::Bound(BoundHandle {
        handle: &quiet,
        states: &[],
        lifespan: None,
        lifespan_ending: None,
    });
    let current = desired.clone();
    let desired = desired_claim_status(Some(&current), &input(binding, &domain));
    assert_eq!(
        (desired.healthy, desired.ready, desired.summary),
        (None, None, None)
    );
    // No lifespan computed: the claim's stays.
    assert_eq!(desired.lifespan, Some(lifespan()));
}

#[test]
fn resource_entries_keep_name_validation_error_and_state() {
    let domain = domain();
    let current = status(json!({
        "resources": [
            {"name": "mine", "validationError": "old", "state": {"kept": true},
             "provider": provider_ref("a")},
        ],
    }));
    let handle = handle(json!({"resources": [{"name": "theirs", "ready": true}]}));
    let binding = Binding::Bound(BoundHandle {
        handle: &handle,
        states: &[None, None],
        lifespan: None,
        lifespan_ending: None,
    });
    // Providers silent: validationError kept; no fresh state: state kept (B07).
    let desired = desired_claim_status(Some(&current), &input(binding.clone(), &domain));
    let resources = desired.resources.as_ref().expect("resources");
    assert_eq!(resources[0].name.as_deref(), Some("mine"));
    assert_eq!(resources[0].validation_error.as_deref(), Some("old"));
    assert_eq!(resources[0].state, Some(json!({"kept": true})));
    assert_eq!(resources[0].ready, Some(true));

    // The providers say the template is fine now: the error goes.
    let planned = [PlannedResource {
        name: Some("planned".to_owned()),
        provider: serde_json::from_value(json!(provider_ref("a"))).expect("ref"),
        validation_error: None,
    }];
    let mut with_plan = input(binding, &domain);
    with_plan.resources = Some(&planned);
    let desired = desired_claim_status(Some(&current), &with_plan);
    let resources = desired.resources.as_ref().expect("resources");
    assert_eq!(resources[0].validation_error, None);
    assert_eq!(resources[0].name.as_deref(), Some("mine"));
}

#[test]
fn an_unbound_claim_gets_planned_entries_and_a_waiting_condition() {
    let domain = domain();
    let planned = [PlannedResource {
        name: Some("config".to_owned()),
        provider: serde_json::from_value(json!(provider_ref("configmap"))).expect("ref"),
        validation_error: None,
    }];
    let mut input = input(
        Binding::Unbound(Unbound::WaitingForHandle {
            why: "no unbound ResourceHandle exists".to_owned(),
        }),
        &domain,
    );
    input.resources = Some(&planned);
    let desired = desired_claim_status(None, &input);
    assert_eq!(desired.resource_handle, None);
    let resources = desired.resources.as_ref().expect("resources");
    assert_eq!(resources[0].name.as_deref(), Some("config"));
    let conditions = desired.conditions.as_ref().expect("conditions");
    let bound = conditions.iter().find(|c| c.type_ == BOUND).expect("Bound");
    assert_eq!(
        (bound.status.as_str(), bound.reason.as_str()),
        ("False", "WaitingForHandle")
    );
    let valid = conditions.iter().find(|c| c.type_ == VALID).expect("Valid");
    assert_eq!(valid.status, "True");
    assert_eq!(valid.observed_generation, Some(3));
    assert_eq!(invalid_message(Some(&desired)), None);
}

/// A claim the approval gate stops waits with its approval's message; an open gate binds.
#[test]
fn a_closed_approval_gate_says_why_the_claim_waits() {
    let first = ApprovalGate::SetPending {
        message: "Ask an admin.".to_owned(),
    };
    assert_eq!(
        Unbound::awaiting_approval(&first),
        Some(Unbound::AwaitingApproval {
            rejected: false,
            message: Some("Ask an admin.".to_owned())
        })
    );
    let rejected = ApprovalGate::Closed {
        rejected: true,
        message: Some("No.".to_owned()),
    };
    assert_eq!(
        Unbound::awaiting_approval(&rejected),
        Some(Unbound::AwaitingApproval {
            rejected: true,
            message: Some("No.".to_owned())
        })
    );
    assert_eq!(Unbound::awaiting_approval(&ApprovalGate::Open), None);
}

/// §6.1: a claim waiting for approval says so in `Bound` and `Ready`, and the pending approval
/// of its first sight is written with them; an approval already there is kept.
#[test]
fn a_claim_awaiting_approval_says_so_and_gets_its_pending_approval() {
    let domain = domain();
    let waiting = |rejected, message: Option<&str>| {
        Binding::Unbound(Unbound::AwaitingApproval {
            rejected,
            message: message.map(str::to_owned),
        })
    };
    let pending = Approval {
        state: ApprovalState::Pending,
        message: Some("Ask an admin.".to_owned()),
    };
    let mut first = input(waiting(false, Some("Ask an admin.")), &domain);
    first.approval = Some(pending.clone());
    let desired = desired_claim_status(None, &first);
    assert_eq!(desired.approval, Some(pending));
    assert_eq!(desired.resources, None);
    let conditions = desired.conditions.as_ref().expect("conditions");
    for type_ in [BOUND, READY] {
        let condition = conditions.iter().find(|c| c.type_ == type_).expect(type_);
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", "ApprovalPending"),
        );
        assert_eq!(condition.message, "waiting for approval: Ask an admin.");
    }

    let rejected = status(json!({"approval": {"state": "rejected"}}));
    let desired = desired_claim_status(Some(&rejected), &input(waiting(true, None), &domain));
    assert_eq!(desired.approval, rejected.approval);
    let conditions = desired.conditions.as_ref().expect("conditions");
    let bound = conditions.iter().find(|c| c.type_ == BOUND).expect("Bound");
    assert_eq!(bound.reason, "ApprovalRejected");
    assert_eq!(
        bound.message,
        "not bound: the claim's approval was rejected"
    );
}

#[test]
fn conditions_move_their_transition_time_only_when_they_flip() {
    let domain = domain();
    let first = desired_claim_status(None, &input(Binding::Unbound(Unbound::Invalid), &domain));
    let mut invalid = input(Binding::Unbound(Unbound::Invalid), &domain);
    invalid.validity = Validity::Invalid("spec.resources[0]: bad".to_owned());
    invalid.now = later();
    let second = desired_claim_status(Some(&first), &invalid);
    assert_eq!(
        invalid_message(Some(&second)),
        Some("spec.resources[0]: bad")
    );
    let valid_time = |s: &ResourceClaimStatus| {
        s.conditions
            .as_ref()
            .and_then(|c| c.iter().find(|c| c.type_ == VALID))
            .map(|c| c.last_transition_time.clone())
    };
    let bound_time = |s: &ResourceClaimStatus| {
        s.conditions
            .as_ref()
            .and_then(|c| c.iter().find(|c| c.type_ == BOUND))
            .map(|c| c.last_transition_time.clone())
    };
    assert_ne!(valid_time(&first), valid_time(&second));
    // Bound stayed False: same transition time.
    assert_eq!(bound_time(&first), bound_time(&second));
    // Other conditions survive.
    let mut foreign = second.clone();
    foreign.conditions.get_or_insert_default().push(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: "Approved".to_owned(),
            status: "True".to_owned(),
            reason: "x".to_owned(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: crate::core::lifespan::api_time(now()),
        },
    );
    let third = desired_claim_status(Some(&foreign), &invalid);
    assert_eq!(third.conditions.as_ref().map(Vec::len), Some(4));
}

#[test]
fn the_status_patch_is_guarded_and_touches_only_what_differs() {
    let domain = domain();
    let desired = desired_claim_status(None, &input(Binding::Unbound(Unbound::Invalid), &domain));
    let patch = status_patch(None, &desired, "42").expect("a patch");
    let ops = serde_json::to_value(&patch).expect("serialises");
    assert_eq!(
        ops[0],
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": "42"})
    );
    assert_eq!(ops[1], json!({"op": "add", "path": "/status", "value": {}}));
    assert_eq!(ops[2]["path"], "/status/conditions");
    assert_eq!(ops.as_array().map(Vec::len), Some(3));

    assert!(status_patch(Some(&desired), &desired, "43").is_none());

    let mut current = desired.clone();
    current.healthy = Some(true);
    current.ready = Some(false);
    let patch = status_patch(Some(&current), &desired, "44").expect("a patch");
    let ops = serde_json::to_value(&patch).expect("serialises");
    assert_eq!(
        ops,
        json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": "44"},
            {"op": "remove", "path": "/status/healthy"},
            {"op": "remove", "path": "/status/ready"},
        ])
    );
}

#[test]
fn recomputing_from_the_written_status_writes_nothing() {
    let domain = domain();
    let handle = handle(json!({"ready": true, "resources": [{"name": "first"}]}));
    let states = [Some(live_config_map()), None];
    let binding = || {
        Binding::Bound(BoundHandle {
            handle: &handle,
            states: &states,
            lifespan: Some(lifespan()),
            lifespan_ending: None,
        })
    };
    let once = desired_claim_status(None, &input(binding(), &domain));
    // As the API server returns it: through JSON.
    let stored: ResourceClaimStatus =
        serde_json::from_value(serde_json::to_value(&once).expect("json")).expect("reads");
    let mut again = input(binding(), &domain);
    again.now = later();
    let twice = desired_claim_status(Some(&stored), &again);
    assert!(status_patch(Some(&stored), &twice, "1").is_none());
}

fn status_lifespan(end: Option<&str>) -> ClaimStatusLifespan {
    ClaimStatusLifespan {
        start: Some("2026-11-21T11:00:00Z".to_owned()),
        end: end.map(str::to_owned),
        ..Default::default()
    }
}

#[test]
fn no_lifespan_event_at_bind_or_when_the_end_is_the_same() {
    let end = status_lifespan(Some("2026-11-21T14:00:00Z"));
    assert_eq!(lifespan_event(None, &end), None);
    assert_eq!(lifespan_event(Some(&end), &end), None);
    // The same instant written differently is no change.
    let same = status_lifespan(Some("2026-11-21T14:00:00+00:00"));
    assert_eq!(lifespan_event(Some(&end), &same), None);
    assert_eq!(
        lifespan_event(Some(&status_lifespan(None)), &status_lifespan(None)),
        None
    );
}

#[test]
fn a_changed_end_quotes_the_new_end() {
    let old = status_lifespan(Some("2026-11-21T14:00:00Z"));
    let new = status_lifespan(Some("2026-11-22T14:00:00Z"));
    let event = lifespan_event(Some(&old), &new).expect("an event");
    assert_eq!(event.reason, "Lifespan end changed");
    assert!(
        event.note.contains("2026-11-22T14:00:00Z"),
        "{}",
        event.note
    );
    assert!(
        !event.note.contains("2026-11-21T14:00:00Z"),
        "{}",
        event.note
    );
    // An end appearing is a change too.
    let appeared = lifespan_event(Some(&status_lifespan(None)), &new).expect("an event");
    assert_eq!(appeared.reason, "Lifespan end changed");
}

#[test]
fn a_removed_end_is_cleared() {
    let old = status_lifespan(Some("2026-11-21T14:00:00Z"));
    let event = lifespan_event(Some(&old), &status_lifespan(None)).expect("an event");
    assert_eq!(event.reason, "Lifespan end cleared");
}

#[test]
fn the_ready_condition_follows_the_handle_and_says_why_not() {
    let domain = domain();
    let ready_of = |status: &ResourceClaimStatus| {
        status
            .conditions
            .as_ref()
            .and_then(|c| c.iter().find(|c| c.type_ == READY))
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
            .expect("a Ready condition")
    };
    let bound_to = |handle: &ResourceHandle| {
        let binding = Binding::Bound(BoundHandle {
            handle,
            states: &[],
            lifespan: None,
            lifespan_ending: None,
        });
        ready_of(&desired_claim_status(None, &input(binding, &domain)))
    };
    let ready = handle(json!({"ready": true}));
    assert_eq!(
        bound_to(&ready),
        (
            "True".to_owned(),
            "Ready".to_owned(),
            "the resources of ResourceHandle guid-abcde are ready".to_owned()
        )
    );
    let waiting = handle(json!({"ready": false, "conditions": [{
        "type": "Ready", "status": "False", "reason": "ResourcesNotReady",
        "message": "config: not ready", "lastTransitionTime": "2026-11-24T10:00:00Z"}]}));
    assert_eq!(
        bound_to(&waiting),
        (
            "False".to_owned(),
            "ResourcesNotReady".to_owned(),
            "ResourceHandle guid-abcde is not ready: config: not ready".to_owned()
        )
    );
    assert_eq!(bound_to(&handle(json!({}))).1, "ReadinessUnknown");
    // Without a readinessCheck, the handle's Ready condition reads its resources themselves,
    // while Poolboy's `status.ready` stays unset: the claim follows the condition.
    let ready_by_itself = handle(json!({"conditions": [{
        "type": "Ready", "status": "True", "reason": "ResourcesReady",
        "message": "every resource is ready", "lastTransitionTime": "2026-11-24T10:00:00Z"}]}));
    assert_eq!(bound_to(&ready_by_itself).0, "True");
    let unbound = desired_claim_status(
        None,
        &input(
            Binding::Unbound(Unbound::WaitingForHandle {
                why: "no unbound ResourceHandle exists".to_owned(),
            }),
            &domain,
        ),
    );
    assert_eq!(ready_of(&unbound).1, "WaitingForHandle");
    let mut invalid = input(Binding::Unbound(Unbound::Invalid), &domain);
    invalid.validity = Validity::Invalid("spec.resources[0]: bad".to_owned());
    let invalid = desired_claim_status(None, &invalid);
    assert_eq!(
        ready_of(&invalid),
        (
            "False".to_owned(),
            "Invalid".to_owned(),
            "spec.resources[0]: bad".to_owned()
        )
    );
}

#[test]
fn a_waiting_claim_says_why_no_handle_fits_in_bounded_words() {
    let domain = OperatorDomain::default();
    let why = format!("guid-a (pool p): {}", "x".repeat(5000));
    let desired = desired_claim_status(
        None,
        &input(Binding::Unbound(Unbound::WaitingForHandle { why }), &domain),
    );
    let conditions = desired.conditions.as_ref().expect("conditions");
    let bound = conditions.iter().find(|c| c.type_ == BOUND).expect("Bound");
    assert!(
        bound
            .message
            .contains("waiting for a matching handle; guid-a (pool p): xxx"),
        "{}",
        bound.message
    );
    assert!(bound.message.len() < 1400, "{}", bound.message.len());
    assert!(bound.message.ends_with('…'));
}

use serde_json::{Value, json};

use super::*;
use crate::core::test_fixtures::now;

fn status(value: Value) -> ResourceClaimStatus {
    serde_json::from_value(value).expect("valid status")
}

fn required(message: Option<&str>) -> ProviderApproval {
    ProviderApproval {
        required: Some(true),
        pending_message: message.map(str::to_owned),
    }
}

#[test]
fn approval_not_required_is_open() {
    assert_eq!(approval_gate(None, None), ApprovalGate::Open);
    let not_required = ProviderApproval {
        required: Some(false),
        pending_message: None,
    };
    assert_eq!(approval_gate(Some(&not_required), None), ApprovalGate::Open);
}

#[test]
fn required_approval_without_state_sets_pending_with_the_message() {
    assert_eq!(
        approval_gate(Some(&required(None)), None),
        ApprovalGate::SetPending {
            message: "Approval pending.".to_owned()
        }
    );
    assert_eq!(
        approval_gate(Some(&required(Some("Wait."))), Some(&status(json!({})))),
        ApprovalGate::SetPending {
            message: "Wait.".to_owned()
        }
    );
}

#[test]
fn pending_and_rejected_are_closed_approved_is_open() {
    let gate = |state: &str| {
        approval_gate(
            Some(&required(None)),
            Some(&status(json!({"approval": {"state": state}}))),
        )
    };
    let closed = |rejected| ApprovalGate::Closed {
        rejected,
        message: None,
    };
    assert_eq!(gate("pending"), closed(false));
    assert_eq!(gate("rejected"), closed(true));
    assert_eq!(gate("approved"), ApprovalGate::Open);
}

/// Only the first sight of a claim that needs approval writes `status.approval`.
#[test]
fn only_the_first_sight_writes_a_pending_approval() {
    let first = approval_gate(Some(&required(Some("Ask an admin."))), None);
    assert_eq!(
        first.pending(),
        Some(Approval {
            state: ApprovalState::Pending,
            message: Some("Ask an admin.".to_owned())
        })
    );
    let rejected = approval_gate(
        Some(&required(Some("Ask an admin."))),
        Some(&status(
            json!({"approval": {"state": "rejected", "message": "No."}}),
        )),
    );
    assert_eq!(rejected.pending(), None);
    assert_eq!(ApprovalGate::Open.pending(), None);
}

#[test]
fn a_claim_with_a_handle_counts_as_approved() {
    let bound = status(json!({
        "approval": {"state": "pending"},
        "resourceHandle": {"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceHandle",
                           "name": "guid-abcde", "namespace": "poolboy"},
    }));
    assert_eq!(
        approval_gate(Some(&required(None)), Some(&bound)),
        ApprovalGate::Open
    );
}

#[test]
fn a_waiting_claim_records_its_provider_by_name_until_approved() {
    assert_eq!(
        json!(provider_while_waiting(None, "gated")),
        json!({"name": "gated"})
    );
    let recorded = status(json!({"provider": {"name": "gated", "parameterValues": {"n": 1}}}));
    assert_eq!(
        json!(provider_while_waiting(Some(&recorded), "gated")),
        json!({"name": "gated", "parameterValues": {"n": 1}})
    );
}

fn claim(value: Value) -> ResourceClaim {
    let mut claim = json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "user", "uid": "u-1"},
        "spec": {"provider": {"name": "p"}},
    });
    if let (Some(base), Some(extra)) = (claim.as_object_mut(), value.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(claim).expect("valid claim")
}

fn map(value: Value) -> BTreeMap<String, String> {
    serde_json::from_value(value).expect("a string map")
}

#[test]
fn metadata_patch_holds_only_what_differs() {
    let c = claim(json!({"metadata": {"name": "c", "namespace": "user",
        "annotations": {"a": "1", "keep": "x"}, "labels": {"l": "1"}}}));
    let annotations = map(json!({"a": "1", "b": "2"}));
    let labels = map(json!({"l": "2"}));
    assert_eq!(
        claim_metadata_patch(&c, Some(&annotations), Some(&labels)),
        Some(json!({"metadata": {"annotations": {"b": "2"}, "labels": {"l": "2"}}}))
    );
    let same = map(json!({"a": "1"}));
    assert_eq!(claim_metadata_patch(&c, Some(&same), None), None);
    assert_eq!(claim_metadata_patch(&c, None, None), None);
}

fn handle(vars: Value, ready: bool) -> ResourceHandle {
    serde_json::from_value(json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceHandle",
        "metadata": {"name": "guid-abcde", "namespace": "poolboy"},
        "spec": {"resources": [], "vars": vars},
        "status": {"ready": ready},
    }))
    .expect("valid handle")
}

fn provider(vars: Value) -> ResourceProvider {
    serde_json::from_value(json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceProvider",
        "metadata": {"name": "p", "namespace": "poolboy"},
        "spec": {"vars": vars},
    }))
    .expect("valid provider")
}

fn decide(
    claim: &ResourceClaim,
    handle: &ResourceHandle,
    provider: Option<&ResourceProvider>,
) -> AutoDecision {
    let templates = TemplateEngine::new();
    let domain = OperatorDomain::default();
    auto_action(&AutoInput {
        claim,
        handle,
        provider,
        templates: &templates,
        domain: &domain,
        now: now(),
    })
}

#[test]
fn no_conditions_do_nothing() {
    let d = decide(&claim(json!({})), &handle(json!({}), true), None);
    assert_eq!(d.action, AutoAction::Nothing);
    assert!(d.errors.is_empty());
}

#[test]
fn auto_delete_sees_the_handle_and_wins_over_detach() {
    let c = claim(json!({"spec": {"provider": {"name": "p"},
        "autoDelete": {"when": "resource_handle.status.ready"},
        "autoDetach": {"when": "true"}}}));
    assert_eq!(
        decide(&c, &handle(json!({}), true), None).action,
        AutoAction::Delete
    );
    assert_eq!(
        decide(&c, &handle(json!({}), false), None).action,
        AutoAction::Detach
    );
}

#[test]
fn auto_detach_sees_claim_parts_and_vars() {
    let c = claim(json!({
        "metadata": {"name": "c", "namespace": "user", "labels": {"go": "yes"}},
        "spec": {"provider": {"name": "p"},
                 "autoDetach": {"when": "metadata.labels.go == 'yes' and spec.provider.name == pname and hv == 1"}}}));
    let p = provider(json!({"pname": "p"}));
    let h = handle(json!({"hv": 1}), false);
    assert_eq!(decide(&c, &h, Some(&p)).action, AutoAction::Detach);
    // Without the provider (a resources claim), `pname` is undefined: not true.
    assert_ne!(decide(&c, &h, None).action, AutoAction::Detach);
}

#[test]
fn a_template_error_is_reported_and_false() {
    let c = claim(json!({"spec": {"provider": {"name": "p"},
        "autoDelete": {"when": "{{ broken"}, "autoDetach": {"when": "false"}}}));
    let d = decide(&c, &handle(json!({}), true), None);
    assert_eq!(d.action, AutoAction::Nothing);
    assert_eq!(d.errors.len(), 1);
    assert!(
        d.errors[0].starts_with("spec.autoDelete.when"),
        "{:?}",
        d.errors
    );
}

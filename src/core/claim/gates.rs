//! Decisions the claim controller takes around binding (§6.1, §7 steps 9–10, §7.5, §7.6):
//! whether a claim is ignored, approval, the provider's
//! `resourceClaimAnnotations`/`resourceClaimLabels`, and the `autoDelete` / `autoDetach`
//! conditions.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::api::claim::{Approval, ApprovalState, ClaimStatusProvider, ResourceClaimStatus};
use crate::api::provider::ProviderApproval;
use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle, ResourceProvider};
use crate::core::template::view::{Subjects, provider_view};
use crate::core::template::{RenderContext, TemplateEngine};

#[cfg(test)]
mod tests;

/// Poolboy 1.12 §6.1: the approval message when the provider sets no `pendingMessage`.
pub(crate) const DEFAULT_PENDING_MESSAGE: &str = "Approval pending.";

/// What approval allows for a provider claim (§6.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ApprovalGate {
    /// No approval needed, approved, or already bound: go on.
    Open,
    /// Approval is required and the claim has none yet: write `status.approval =
    /// {state: pending, message}` and wait.
    SetPending { message: String },
    /// Pending or rejected: wait for a status change.
    Closed {
        rejected: bool,
        message: Option<String>,
    },
}

impl ApprovalGate {
    /// `status.approval` as the gate writes it: pending, on first sight of a claim that needs
    /// approval; `None` leaves it as it is.
    pub(crate) fn pending(&self) -> Option<Approval> {
        match self {
            ApprovalGate::SetPending { message } => Some(Approval {
                state: ApprovalState::Pending,
                message: Some(message.clone()),
            }),
            ApprovalGate::Open | ApprovalGate::Closed { .. } => None,
        }
    }
}

/// `status.provider` of a claim that waits for approval: what its status records, or on first
/// sight the provider's name alone, as Poolboy writes it (§6.1: the parameter values are
/// validated and recorded once it is approved).
pub(crate) fn provider_while_waiting(
    status: Option<&ResourceClaimStatus>,
    provider: &str,
) -> ClaimStatusProvider {
    let recorded = status.and_then(|s| s.provider.clone());
    recorded.unwrap_or_else(|| ClaimStatusProvider {
        name: provider.to_owned(),
        parameter_values: None,
        validation_errors: None,
    })
}

/// §6.1: whether a provider claim may be provisioned. "Approved" is `status.approval.state ==
/// approved`, or the claim already has a handle.
pub(crate) fn approval_gate(
    approval: Option<&ProviderApproval>,
    status: Option<&ResourceClaimStatus>,
) -> ApprovalGate {
    let required = approval.and_then(|a| a.required).unwrap_or(false);
    if !required {
        return ApprovalGate::Open;
    }
    if status.is_some_and(|s| s.resource_handle.is_some()) {
        return ApprovalGate::Open;
    }
    match status.and_then(|s| s.approval.as_ref()) {
        None => ApprovalGate::SetPending {
            message: approval
                .and_then(|a| a.pending_message.clone())
                .unwrap_or_else(|| DEFAULT_PENDING_MESSAGE.to_owned()),
        },
        Some(given) if given.state == ApprovalState::Approved => ApprovalGate::Open,
        Some(given) => ApprovalGate::Closed {
            rejected: given.state == ApprovalState::Rejected,
            message: given.message.clone(),
        },
    }
}

/// §6.1: the merge patch forcing the provider's `resourceClaimAnnotations` and
/// `resourceClaimLabels` onto a provider claim; `None` when the claim has them already.
pub(crate) fn claim_metadata_patch(
    claim: &ResourceClaim,
    annotations: Option<&BTreeMap<String, String>>,
    labels: Option<&BTreeMap<String, String>>,
) -> Option<Value> {
    let missing = |wanted: Option<&BTreeMap<String, String>>,
                   current: Option<&BTreeMap<String, String>>| {
        let differing: Map<String, Value> = wanted
            .into_iter()
            .flatten()
            .filter(|(k, v)| current.and_then(|c| c.get(*k)) != Some(*v))
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        (!differing.is_empty()).then_some(differing)
    };
    let mut metadata = Map::new();
    if let Some(a) = missing(annotations, claim.metadata.annotations.as_ref()) {
        metadata.insert("annotations".to_owned(), Value::Object(a));
    }
    if let Some(l) = missing(labels, claim.metadata.labels.as_ref()) {
        metadata.insert("labels".to_owned(), Value::Object(l));
    }
    (!metadata.is_empty()).then(|| json!({ "metadata": metadata }))
}

/// What the `autoDelete` / `autoDetach` conditions ask for (§7 steps 9–10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AutoAction {
    Nothing,
    /// Delete the claim (its handle and resources go with it).
    Delete,
    /// Mark the claim detached, then delete its handle; the claim stays.
    Detach,
}

/// The result of evaluating the conditions: the action, and the template errors met (each
/// error makes its condition false, §7 step 9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AutoDecision {
    pub action: AutoAction,
    pub errors: Vec<String>,
}

/// What the conditions see (§5.7).
pub(crate) struct AutoInput<'a> {
    pub claim: &'a ResourceClaim,
    pub handle: &'a ResourceHandle,
    /// A provider claim's provider (its `vars` are seen only by provider claims).
    pub provider: Option<&'a ResourceProvider>,
    pub templates: &'a TemplateEngine,
    pub domain: &'a OperatorDomain,
    pub now: DateTime<Utc>,
}

/// §7 steps 9–10: `autoDelete.when` first; when it is not true, `autoDetach.when`.
pub(crate) fn auto_action(input: &AutoInput<'_>) -> AutoDecision {
    let spec = &input.claim.spec;
    let delete = spec.auto_delete.as_ref().and_then(|c| c.when.as_deref());
    let detach = spec.auto_detach.as_ref().and_then(|c| c.when.as_deref());
    let mut errors = Vec::new();
    if delete.is_none() && detach.is_none() {
        return AutoDecision {
            action: AutoAction::Nothing,
            errors,
        };
    }
    let scope = auto_scope(input);
    let mut check = |field: &str, condition: Option<&str>| match condition {
        None => false,
        Some(condition) => match input.templates.check(condition, &scope) {
            Ok(value) => value,
            Err(e) => {
                errors.push(format!("spec.{field}.when: {e}"));
                false
            }
        },
    };
    let action = if check("autoDelete", delete) {
        AutoAction::Delete
    } else if check("autoDetach", detach) {
        AutoAction::Detach
    } else {
        AutoAction::Nothing
    };
    AutoDecision { action, errors }
}

/// §5.7: provider vars (provider claims), handle vars, `resource_claim`, `resource_handle`,
/// `resource_provider`, and the claim's `metadata`, `spec`, `status`.
fn auto_scope(input: &AutoInput<'_>) -> RenderContext {
    let subjects = Subjects::new(Some(input.claim), Some(input.handle), input.domain);
    let claim = serde_json::to_value(input.claim).unwrap_or(Value::Null);
    let part = |name: &str| claim.get(name).cloned().unwrap_or(Value::Null);
    let provider_vars = input.provider.and_then(|p| p.spec.vars.as_ref());
    RenderContext::new(input.now, &Map::new())
        .with_variable("metadata", part("metadata"))
        .with_variable("spec", part("spec"))
        .with_variable("status", part("status"))
        .with_variable("resource_claim", &subjects.claim)
        .with_variable("resource_handle", &subjects.handle)
        .with_variable(
            "resource_provider",
            input
                .provider
                .map_or(Value::Null, |p| provider_view(p, input.domain)),
        )
        .with_template_variables(provider_vars)
        .with_template_variables(subjects.handle_vars.as_ref())
}

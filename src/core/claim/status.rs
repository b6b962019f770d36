//! A claim's status as the claim controller, its only writer, wants it (§7 step 8, §7.4,
//! Δ§3.1.3, B07): computed from the current status, what the providers say about the claim,
//! and the bound handle with the live state of its resources; then written as one JSON patch
//! guarded by the claim's resourceVersion, touching only the fields that differ (B06).

use chrono::{DateTime, Utc};
use json_patch::{Patch, PatchOperation, RemoveOperation, TestOperation};
use serde_json::{Map, Value, json};

use crate::api::OperatorDomain;
use crate::api::ResourceHandle;
use crate::api::claim::{
    Approval, ClaimHandleRef, ClaimStatusLifespan, ClaimStatusProvider, ClaimStatusResource,
    ClaimWaitEstimate, ResourceClaimStatus,
};
use crate::api::refs::ProviderRef;
use crate::core::claim::gates::ApprovalGate;
use crate::core::claim::resolve::PlannedResource;
use crate::core::conditions::{
    self, BOUND, ConditionStatus, DesiredCondition, LIFESPAN_ENDING, READY, VALID, set_condition,
};
use crate::core::handle::status::ApplyFailureReason;
use crate::core::json::pointer::{add, pointer};
use crate::core::lifespan::warnings::LifespanEnding;

#[cfg(test)]
mod tests;

/// Whether the claim is valid, and if not, why (the message users read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Validity {
    Valid,
    Invalid(String),
}

/// Why a claim has no handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unbound {
    /// It is invalid: nothing is bound until it is corrected.
    Invalid,
    /// No unbound handle fits and creation is disabled: it waits for one (Δ§2.3, B18).
    /// `why`: why none fits, per handle.
    WaitingForHandle { why: String },
    /// It names a pool capped by `maxSize` none of whose handles is free: it waits
    /// for one rather than get a handle of its own.
    WaitingForPool {
        pool: String,
        max_size: i64,
        why: String,
    },
    /// Its namespace holds `limit` claims with a handle of `provider` already, the provider's
    /// `maxClaimsPerNamespace`: it waits for one of them to go.
    OverLimit {
        provider: String,
        limit: i64,
        namespace: String,
    },
    /// A handle of the capped pool it names is free, but claims ahead of it in the pool's fair
    /// line go first: `ahead` of the `of` claims waiting.
    InLine {
        pool: String,
        ahead: usize,
        of: usize,
    },
    /// Its provider requires approval (§6.1), and its `status.approval` is pending or
    /// rejected, with this message.
    AwaitingApproval {
        rejected: bool,
        message: Option<String>,
    },
}

/// The `Bound` reason of a claim waiting for a capped pool none of whose handles is free.
pub(crate) const WAITING_FOR_POOL: &str = "WaitingForPool";
/// The `Bound` reason of a claim behind others in a capped pool's fair line.
pub(crate) const WAITING_IN_LINE: &str = "WaitingInLine";

/// The most characters of "why no handle fits" a condition message carries: a claim's status
/// stays small however many handles there are.
const WHY_LENGTH: usize = 1000;

impl Unbound {
    /// Why a claim `gate` stops has no handle; `None` when the gate is open.
    pub(crate) fn awaiting_approval(gate: &ApprovalGate) -> Option<Unbound> {
        match gate {
            ApprovalGate::Open => None,
            ApprovalGate::SetPending { message } => Some(Unbound::AwaitingApproval {
                rejected: false,
                message: Some(message.clone()),
            }),
            ApprovalGate::Closed { rejected, message } => Some(Unbound::AwaitingApproval {
                rejected: *rejected,
                message: message.clone(),
            }),
        }
    }

    /// The reason and message of the claim's `Bound` and `Ready` conditions while it waits.
    pub(crate) fn waiting(&self) -> (&'static str, String) {
        match self {
            Unbound::Invalid => ("Invalid", "not bound: the claim is invalid".to_owned()),
            Unbound::WaitingForHandle { why } => (
                "WaitingForHandle",
                format!(
                    "no unbound ResourceHandle matches the claim and handle creation is disabled \
                     (disableCreation): waiting for a matching handle; {}",
                    bounded(why)
                ),
            ),
            Unbound::WaitingForPool {
                pool,
                max_size,
                why,
            } => (
                WAITING_FOR_POOL,
                format!(
                    "no handle of ResourcePool {pool} is free, and the pool is capped at \
                     {max_size} handles (maxSize): waiting for one; {}",
                    bounded(why)
                ),
            ),
            Unbound::OverLimit {
                provider,
                limit,
                namespace,
            } => (
                "WaitingForLimit",
                format!(
                    "namespace {namespace} has {limit} active claims of ResourceProvider \
                     {provider}, its limit (maxClaimsPerNamespace): waiting for one of them to go"
                ),
            ),
            Unbound::AwaitingApproval { rejected, message } => {
                let message = message.as_deref().filter(|m| !m.is_empty());
                match (rejected, message) {
                    (false, Some(message)) => (
                        "ApprovalPending",
                        format!("waiting for approval: {message}"),
                    ),
                    (false, None) => ("ApprovalPending", "waiting for approval".to_owned()),
                    // The message may still be the pending one: the approver sets the state.
                    (true, Some(message)) => (
                        "ApprovalRejected",
                        format!(
                            "not bound: the claim's approval was rejected (approval message: \
                             {message})"
                        ),
                    ),
                    (true, None) => (
                        "ApprovalRejected",
                        "not bound: the claim's approval was rejected".to_owned(),
                    ),
                }
            }
            Unbound::InLine { pool, ahead, of } => (
                WAITING_IN_LINE,
                format!(
                    "ResourcePool {pool} is short: {ahead} of the {of} claims waiting for it are \
                     ahead of this one (first come, first served within a namespace, \
                     round-robin across namespaces)"
                ),
            ),
        }
    }
}

/// `why`, cut at [`WHY_LENGTH`] characters.
fn bounded(why: &str) -> String {
    match why.char_indices().nth(WHY_LENGTH) {
        Some((end, _)) => format!("{}…", &why[..end]),
        None => why.to_owned(),
    }
}

/// The claim's binding.
#[derive(Debug, Clone)]
pub(crate) enum Binding<'a> {
    Unbound(Unbound),
    Bound(BoundHandle<'a>),
}

/// The handle a claim is bound to, and what the claim mirrors from it.
#[derive(Debug, Clone)]
pub(crate) struct BoundHandle<'a> {
    pub handle: &'a ResourceHandle,
    /// The live object of each handle resource, by index, as its watch last saw it; `None`
    /// keeps the state the claim has (B07).
    pub states: &'a [Option<Value>],
    /// `status.lifespan` as [`crate::core::lifespan::sync_claim_lifespan`] computed it;
    /// `None` keeps the claim's.
    pub lifespan: Option<ClaimStatusLifespan>,
    /// The `LifespanEnding` condition; `None` when expiry warnings are off.
    pub lifespan_ending: Option<LifespanEnding>,
}

/// Everything the desired status is computed from, besides the current status.
#[derive(Debug, Clone)]
pub(crate) struct StatusInput<'a> {
    pub validity: Validity,
    /// `status.provider` as it should be; `None` leaves it alone.
    pub provider: Option<&'a ClaimStatusProvider>,
    /// `status.resources` as the providers define them; `None` leaves the entries alone.
    pub resources: Option<&'a [PlannedResource]>,
    /// `status.approval` as it should be (§6.1: pending, on first sight of a claim that needs
    /// approval); `None` leaves it alone.
    pub approval: Option<Approval>,
    pub binding: Binding<'a>,
    /// The claim's `metadata.generation`, for the conditions' `observedGeneration`.
    pub generation: Option<i64>,
    pub domain: &'a OperatorDomain,
    pub now: DateTime<Utc>,
    /// How long the claim will probably wait (`core::claim::estimate`), and what its `Ready`
    /// message says of it; `None` removes `status.waitEstimate`.
    pub wait: Option<(ClaimWaitEstimate, String)>,
}

/// The status the claim should have. `approval`, which others decide, is kept but for the
/// pending state the input may set; so is everything this input says nothing about.
pub(crate) fn desired_claim_status(
    current: Option<&ResourceClaimStatus>,
    input: &StatusInput<'_>,
) -> ResourceClaimStatus {
    let mut status = current.cloned().unwrap_or_default();
    if let Some(provider) = input.provider {
        status.provider = Some(provider.clone());
    }
    if let Some(approval) = &input.approval {
        status.approval = Some(approval.clone());
    }
    let bound = match &input.binding {
        Binding::Bound(bound) => Some(bound),
        Binding::Unbound(_) => None,
    };
    status.resources = merged_resources(
        status.resources.as_deref().unwrap_or(&[]),
        input.resources,
        bound,
        input.domain,
    );
    if let Some(bound) = bound {
        let handle = bound.handle;
        let name = handle.metadata.name.clone().unwrap_or_default();
        let detached = status
            .resource_handle
            .as_ref()
            .filter(|h| h.name == name)
            .and_then(|h| h.detached);
        status.resource_handle = Some(ClaimHandleRef {
            api_version: input.domain.api_version(),
            kind: "ResourceHandle".to_owned(),
            name,
            namespace: handle.metadata.namespace.clone().unwrap_or_default(),
            detached,
        });
        // §7.4: mirrored from the handle, removed when it has none.
        let handle_status = handle.status.as_ref();
        status.healthy = handle_status.and_then(|s| s.healthy);
        status.ready = handle_status.and_then(|s| s.ready);
        status.summary = handle_status.and_then(|s| s.summary.clone());
        if let Some(lifespan) = &bound.lifespan {
            status.lifespan = Some(lifespan.clone()).filter(|l| *l != Default::default());
        }
    }

    let mut conditions = status.conditions.take().unwrap_or_default();
    let valid = match &input.validity {
        Validity::Valid => (
            ConditionStatus::True,
            "Valid",
            "the claim's providers resolve and its values pass validation".to_owned(),
        ),
        Validity::Invalid(message) => (ConditionStatus::False, "Invalid", message.clone()),
    };
    let bound = match &input.binding {
        Binding::Bound(bound) => (
            ConditionStatus::True,
            "Bound",
            format!(
                "bound to ResourceHandle {}",
                bound.handle.metadata.name.as_deref().unwrap_or_default()
            ),
        ),
        Binding::Unbound(unbound) => {
            let (reason, message) = unbound.waiting();
            (ConditionStatus::False, reason, message)
        }
    };
    let wait = input.wait.as_ref().map(|(_, message)| message.as_str());
    let ready = ready_condition(&input.binding, &input.validity, wait);
    status.wait_estimate = input.wait.as_ref().map(|(estimate, _)| estimate.clone());
    let ending = match &input.binding {
        Binding::Bound(bound) => bound.lifespan_ending.as_ref(),
        Binding::Unbound(_) => None,
    };
    match ending {
        Some(ending) => {
            let desired = DesiredCondition {
                type_: LIFESPAN_ENDING,
                status: ending.status,
                reason: ending.reason,
                message: ending.message.clone(),
                observed_generation: input.generation,
            };
            set_condition(&mut conditions, desired, input.now);
        }
        None => conditions.retain(|c| c.type_ != LIFESPAN_ENDING),
    }
    for (type_, (status, reason, message)) in [(VALID, valid), (BOUND, bound), (READY, ready)] {
        let desired = DesiredCondition {
            type_,
            status,
            reason,
            message,
            observed_generation: input.generation,
        };
        set_condition(&mut conditions, desired, input.now);
    }
    status.conditions = Some(conditions);
    status
}

/// The claim's `Ready` condition (what `kubectl wait --for=condition=Ready` waits
/// for): True once its handle's resources are all ready; else why not, with the handle's own
/// `Ready` message when it has one, or the claim's own problem.
fn ready_condition(
    binding: &Binding<'_>,
    validity: &Validity,
    wait: Option<&str>,
) -> (ConditionStatus, &'static str, String) {
    let (status, reason, message) = readiness(binding, validity);
    match wait {
        Some(wait) if status != ConditionStatus::True => {
            (status, reason, format!("{message}; {wait}"))
        }
        _ => (status, reason, message),
    }
}

fn readiness(
    binding: &Binding<'_>,
    validity: &Validity,
) -> (ConditionStatus, &'static str, String) {
    let bound = match binding {
        Binding::Bound(bound) => bound,
        Binding::Unbound(Unbound::Invalid) => {
            let message = match validity {
                Validity::Invalid(problem) => problem.clone(),
                Validity::Valid => "not ready: the claim is invalid".to_owned(),
            };
            return (ConditionStatus::False, "Invalid", message);
        }
        Binding::Unbound(unbound) => {
            let (reason, message) = unbound.waiting();
            return (ConditionStatus::False, reason, message);
        }
    };
    let name = bound.handle.metadata.name.as_deref().unwrap_or_default();
    let status = bound.handle.status.as_ref();
    let handle_ready = status
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| conditions::find(c, READY));
    let detail = handle_ready
        .map(|c| c.message.as_str())
        .filter(|m| !m.is_empty());
    let with_detail = |summary: String| match detail {
        Some(detail) => format!("{summary}: {detail}"),
        None => summary,
    };
    // A resource the API server refused keeps the handle's reason (`Forbidden`, …), so that
    // scripts read the same reason on the claim.
    let reason = |default: &'static str| {
        handle_ready
            .and_then(|c| ApplyFailureReason::parse(&c.reason))
            .map_or(default, ApplyFailureReason::as_str)
    };
    // The handle's `Ready` condition, which also reads resources whose provider has no
    // `readinessCheck`; Poolboy's `status.ready` for a handle without one yet.
    let ready = match handle_ready.map(|c| c.status.as_str()) {
        Some("True") => Some(true),
        Some("False") => Some(false),
        _ => status.and_then(|s| s.ready),
    };
    match ready {
        Some(true) => (
            ConditionStatus::True,
            "Ready",
            format!("the resources of ResourceHandle {name} are ready"),
        ),
        Some(false) => (
            ConditionStatus::False,
            reason("ResourcesNotReady"),
            with_detail(format!("ResourceHandle {name} is not ready")),
        ),
        None => (
            ConditionStatus::Unknown,
            reason("ReadinessUnknown"),
            with_detail(format!(
                "the readiness of ResourceHandle {name} is not known yet"
            )),
        ),
    }
}

/// The message of the claim's `Valid` condition when it is False.
pub(crate) fn invalid_message(status: Option<&ResourceClaimStatus>) -> Option<&str> {
    conditions::problem(status.and_then(|s| s.conditions.as_deref()), VALID)
}

/// `status.resources` (Δ§3.1.3, B07): one entry per resource the claim or its handle has
/// (never fewer than now). Each keeps the claim's `name`; takes `validationError` from the
/// providers when they spoke; takes `provider` from the handle, else the providers; takes
/// `reference`, `healthy`, `ready` and `waitingFor` from the handle's status entry when it has
/// one; and takes the pruned live state when there is one, else keeps its state.
fn merged_resources(
    current: &[ClaimStatusResource],
    planned: Option<&[PlannedResource]>,
    bound: Option<&BoundHandle<'_>>,
    domain: &OperatorDomain,
) -> Option<Vec<ClaimStatusResource>> {
    let handle_spec = bound
        .and_then(|b| b.handle.spec.resources.as_deref())
        .unwrap_or(&[]);
    let handle_status = bound
        .and_then(|b| b.handle.status.as_ref())
        .and_then(|s| s.resources.as_deref())
        .unwrap_or(&[]);
    let length = [
        current.len(),
        planned.map_or(0, <[_]>::len),
        handle_spec.len(),
        handle_status.len(),
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    if length == 0 {
        return (!current.is_empty()).then(Vec::new);
    }
    let resources = (0..length)
        .map(|index| {
            let mut entry = current.get(index).cloned().unwrap_or_default();
            if let Some(planned) = planned.and_then(|p| p.get(index)) {
                if entry.name.is_none() {
                    entry.name = planned.name.clone();
                }
                entry.provider = Some(planned.provider.clone());
                entry.validation_error = planned.validation_error.clone();
            }
            if let Some(resource) = handle_spec.get(index) {
                let provider = &resource.provider;
                entry.provider = Some(ProviderRef {
                    api_version: Some(provider.api_version.clone()),
                    kind: Some(provider.kind.clone()),
                    name: provider.name.clone(),
                    namespace: Some(provider.namespace.clone()),
                });
            }
            if let Some(resource) = handle_status.get(index) {
                if entry.name.is_none() {
                    entry.name = resource.name.clone();
                }
                entry.reference = resource.reference.clone();
                entry.healthy = resource.healthy;
                entry.ready = resource.ready;
                entry.waiting_for = resource.waiting_for;
            }
            let state = bound
                .and_then(|b| b.states.get(index))
                .and_then(Option::as_ref);
            if let Some(state) = state {
                entry.state = Some(pruned_state(state, domain));
            }
            entry
        })
        .collect();
    Some(resources)
}

/// A live resource as the claim shows it (Δ§3.1.3, #136): without `metadata.managedFields`,
/// `metadata.generation`, Poolboy's own annotations (`D/…`, and `annotations` itself when
/// nothing is left) and kopf's `status.diffBase`. Everything else stays, resourceVersion and
/// uid included.
pub(crate) fn pruned_state(state: &Value, domain: &OperatorDomain) -> Value {
    let mut state = state.clone();
    let prefix = format!("{domain}/");
    if let Some(metadata) = state.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
        metadata.remove("generation");
        let annotations_left = match metadata.get_mut("annotations") {
            Some(Value::Object(annotations)) => {
                annotations.retain(|key, _| !key.starts_with(&prefix));
                !annotations.is_empty()
            }
            Some(_) => true,
            None => true,
        };
        if !annotations_left {
            metadata.remove("annotations");
        }
    }
    if let Some(status) = state.get_mut("status").and_then(Value::as_object_mut) {
        status.remove("diffBase");
    }
    state
}

/// The JSON patch that turns `current` into `desired` (`None` when they are equal): first
/// `test /metadata/resourceVersion`, so that a write based on a stale read fails instead of
/// undoing someone's change (B06), then one `add` or `remove` per top-level status field that
/// differs. Fields `desired` does not model (kopf's `diffBase`, …) are never touched.
pub(crate) fn status_patch(
    current: Option<&ResourceClaimStatus>,
    desired: &ResourceClaimStatus,
    resource_version: &str,
) -> Option<Patch> {
    let current_fields = fields(current);
    let desired_fields = fields(Some(desired));
    let mut ops = Vec::new();
    for (key, value) in &desired_fields {
        if current_fields.get(key) != Some(value) {
            ops.push(add(&["status", key], value.clone()));
        }
    }
    for key in current_fields.keys() {
        if !desired_fields.contains_key(key) {
            ops.push(PatchOperation::Remove(RemoveOperation {
                path: pointer(&["status", key]),
            }));
        }
    }
    if ops.is_empty() {
        return None;
    }
    let mut patch = vec![PatchOperation::Test(TestOperation {
        path: pointer(&["metadata", "resourceVersion"]),
        value: json!(resource_version),
    })];
    if current.is_none() {
        patch.push(add(&["status"], json!({})));
    }
    patch.extend(ops);
    Some(Patch(patch))
}

fn fields(status: Option<&ResourceClaimStatus>) -> Map<String, Value> {
    match status.map(serde_json::to_value) {
        Some(Ok(Value::Object(map))) => map,
        _ => Map::new(),
    }
}

/// The Event a lifespan change earns (Δ§3.1.3): its reason and note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LifespanEvent {
    pub reason: &'static str,
    pub note: String,
}

/// Δ§3.1.3: a claim that already has `status.lifespan` gets a Normal Event when its end (the
/// handle's end) changes, "Lifespan end changed", or disappears, "Lifespan end cleared".
/// Fix of Q8: the note quotes the NEW end, not the old one.
pub(crate) fn lifespan_event(
    current: Option<&ClaimStatusLifespan>,
    desired: &ClaimStatusLifespan,
) -> Option<LifespanEvent> {
    let current = current?;
    let same = |a: &str, b: &str| match (
        DateTime::parse_from_rfc3339(a),
        DateTime::parse_from_rfc3339(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    match (current.end.as_deref(), desired.end.as_deref()) {
        (Some(old), Some(new)) if same(old, new) => None,
        (None, None) => None,
        (_, Some(new)) => Some(LifespanEvent {
            reason: "Lifespan end changed",
            note: format!("Lifespan end changed to {new}"),
        }),
        (Some(old), None) => Some(LifespanEvent {
            reason: "Lifespan end cleared",
            note: format!("Lifespan end cleared (was {old})"),
        }),
    }
}

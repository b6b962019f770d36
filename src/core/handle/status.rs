//! A handle's status (Poolboy 1.12 §13, 1.17 Δ§3.2 `update_status`, B08, B23): one entry per
//! `spec.resources` entry with its reference, `waitingFor`, health and readiness; the overall
//! health and readiness; the provider's status summary; and two conditions, `Ready` and
//! `Valid`. Computed whole on every reconcile and written only where it differs.

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::api::ResourceHandle;
use crate::api::handle::{HandleStatusResource, ResourceHandleStatus};
use crate::core::conditions::{
    self, ConditionStatus, DesiredCondition, READY, VALID, set_condition,
};
use crate::core::handle::kstatus::{self, Observed};
use crate::core::handle::plan::{HandleProviders, PlanEnvironment, ResourcePlan};
use crate::core::json::patch::{PatchOp, escape_pointer_segment};
use crate::core::provider::CompiledProvider;
use crate::core::template::RenderContext;
use crate::core::template::TemplateValue;
use crate::core::template::view::handle_value;

#[cfg(test)]
mod tests;

/// What the status is computed from.
pub(crate) struct StatusInput<'a> {
    pub handle: &'a ResourceHandle,
    pub providers: &'a HandleProviders,
    /// The provider whose `statusSummaryTemplate` renders `status.summary`
    /// ([`summary_provider_name`]). `None` leaves the summary as it is.
    pub summary_provider: Option<&'a CompiledProvider>,
    /// This reconcile's plan per resource. A resource without a plan keeps its `waitingFor`.
    pub plans: &'a [ResourcePlan],
    /// The live object of each resource, index-aligned.
    pub states: &'a [Option<Value>],
    /// Problems of the handle as a whole (besides the invalid resources of `plans`).
    pub problems: &'a [String],
    /// The resources this reconcile could not create or update, and why.
    pub apply_failures: &'a [ApplyFailure],
}

/// A resource the API server would not let the broker create or update: its
/// `Ready` condition says so with a stable reason, and the handle and claim get an Event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ApplyFailure {
    /// The resource's index in `spec.resources`.
    pub index: usize,
    pub reason: ApplyFailureReason,
    /// What the API server said.
    pub message: String,
}

/// Why a resource could not be created or updated, as a condition's and an Event's reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ApplyFailureReason {
    /// 401/403: the broker's RBAC does not cover the kind or namespace.
    Forbidden,
    /// 4xx: the API server (or an admission webhook) refused the object as rendered.
    Refused,
    /// Anything else: the API server was unavailable or failed.
    Failed,
}

impl ApplyFailureReason {
    /// From an HTTP status code of the API server.
    pub(crate) fn of_status(code: u16) -> Self {
        match code {
            401 | 403 => Self::Forbidden,
            400..=499 => Self::Refused,
            _ => Self::Failed,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Forbidden => "Forbidden",
            Self::Refused => "ResourceRefused",
            Self::Failed => "ResourceFailed",
        }
    }

    /// The failure a `Ready` condition's reason names, if it names one.
    pub(crate) fn parse(reason: &str) -> Option<Self> {
        [Self::Forbidden, Self::Refused, Self::Failed]
            .into_iter()
            .find(|r| r.as_str() == reason)
    }
}

/// The status to have, and the template failures met on the way (Poolboy logs them; a failed
/// check counts as unknown and a failed summary leaves the summary unchanged).
#[derive(Debug)]
pub(crate) struct DesiredStatus {
    pub status: ResourceHandleStatus,
    pub failures: Vec<String>,
}

/// The provider whose `statusSummaryTemplate` renders the handle's `status.summary` (Δ D10):
/// `spec.provider`, else the provider of the last resource.
pub(crate) fn summary_provider_name(handle: &ResourceHandle) -> Option<&str> {
    match &handle.spec.provider {
        Some(provider) => Some(&provider.name),
        None => handle
            .spec
            .resources
            .as_deref()
            .and_then(<[_]>::last)
            .map(|r| r.provider.name.as_str()),
    }
}

/// Computes the whole status (§13, Δ§3.2 update_status).
pub(crate) fn desired_status(env: &PlanEnvironment<'_>, input: &StatusInput<'_>) -> DesiredStatus {
    let handle = input.handle;
    let current = handle.status.clone().unwrap_or_default();
    let current_resources = current.resources.as_deref().unwrap_or(&[]);
    let entries = handle.spec.resources.as_deref().unwrap_or(&[]);
    let view = handle_value(handle, env.domain);
    let mut failures = Vec::new();
    let mut resources = Vec::with_capacity(entries.len());
    // Each resource's readiness as the `Ready` condition counts it.
    let mut resources_ready = Vec::with_capacity(entries.len());
    let mut not_ready = Vec::new();
    let mut problems: Vec<String> = input.problems.to_vec();

    // Δ§3.2 step 5 (B08): exactly one entry per spec entry, `name` copied from the spec.
    for (index, entry) in entries.iter().enumerate() {
        let mut resource = current_resources.get(index).cloned().unwrap_or_default();
        if entry.name.is_some() {
            resource.name = entry.name.clone();
        }
        let label = entry
            .name
            .clone()
            .unwrap_or_else(|| format!("{} #{index}", entry.provider.name));
        let plan = input.plans.get(index);
        match plan {
            Some(ResourcePlan::Apply { reference, .. }) => {
                // The reference is recorded once; name and namespace stay pinned to it
                // (§12.3 step 5). Poolboy clears `waitingFor` only with the first reference;
                // it is cleared whenever the resource is no longer waiting.
                if resource.reference.is_none() {
                    resource.reference = Some(reference.clone());
                }
                resource.waiting_for = None;
            }
            Some(other) => resource.waiting_for = other.waiting_for(),
            None => {}
        }
        if let Some(ResourcePlan::Invalid(message)) = plan {
            problems.push(message.clone());
        }

        let state = input.states.get(index).and_then(Option::as_ref);
        let provider = input.providers.get(index);
        let (healthy, ready) = match (state, provider) {
            (Some(state), Some(provider)) => {
                let healthy = run_check(env, provider, "healthCheck", state, &view, &mut failures);
                let ready = if healthy == Some(false) {
                    Some(false)
                } else {
                    run_check(env, provider, "readinessCheck", state, &view, &mut failures)
                };
                (healthy, ready)
            }
            (Some(_), None) => (None, None),
            // §13: without live state, health is unknown and readiness false.
            (None, _) => (None, Some(false)),
        };
        resource.healthy = healthy;
        resource.ready = ready;
        // The `Ready` condition goes by the provider's `readinessCheck`; without one, by the
        // resource's own status (`kstatus`). Poolboy's `ready` stays the provider's alone.
        let observed = match (ready, state, provider) {
            (None, Some(state), Some(provider)) if provider.spec().readiness_check.is_none() => {
                Some(kstatus::observed(state))
            }
            _ => None,
        };
        let condition_ready = match &observed {
            Some(observed) => Some(*observed == Observed::Ready),
            None => ready,
        };
        let failure = input.apply_failures.iter().find(|f| f.index == index);
        if let Some(failure) = failure {
            not_ready.push(format!("{label}: {}", failure.message));
        } else if let Some(ResourcePlan::Invalid(message)) = plan {
            not_ready.push(format!("{label}: invalid definition: {message}"));
        } else if let Some(Observed::NotReady(why)) = &observed {
            not_ready.push(format!("{label}: {why}"));
        } else if condition_ready != Some(true) {
            not_ready.push(format!(
                "{label}: {}",
                why_not_ready(plan, state.is_some(), healthy, ready)
            ));
        }
        resources.push(resource);
        resources_ready.push(condition_ready);
    }

    let healthy = overall(resources.iter().map(|r| r.healthy));
    let ready = overall(resources.iter().map(|r| r.ready));
    let condition_ready = overall(resources_ready.into_iter());
    let summary = match input.summary_provider {
        Some(provider) => match summary(env, handle, provider, input.states, &view) {
            Ok(Some(summary)) => Some(summary),
            Ok(None) => current.summary.clone(),
            Err(failure) => {
                failures.push(failure);
                current.summary.clone()
            }
        },
        None => current.summary.clone(),
    };

    // `Ready` follows `status.ready` where the providers say, and the resources' own status
    // where they do not, with the reason of each resource not ready; `Valid` reports bad
    // input: definitions that cannot be rendered, a missing provider, a broken
    // `spec.lifespan.end`.
    let ready_condition = match (input.apply_failures.first(), condition_ready) {
        (Some(failure), _) => (
            if condition_ready == Some(true) {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            },
            failure.reason.as_str(),
            not_ready.join("; "),
        ),
        (None, Some(true)) => (
            ConditionStatus::True,
            "ResourcesReady",
            "every resource is ready".to_owned(),
        ),
        (None, Some(false)) => (
            ConditionStatus::False,
            "ResourcesNotReady",
            not_ready.join("; "),
        ),
        (None, None) if resources.is_empty() => (
            ConditionStatus::Unknown,
            "NoResources",
            "no resources".to_owned(),
        ),
        (None, None) => (
            ConditionStatus::Unknown,
            "ReadinessUnknown",
            not_ready.join("; "),
        ),
    };
    let valid_condition = if problems.is_empty() {
        (
            ConditionStatus::True,
            "Rendered",
            "every resource definition renders".to_owned(),
        )
    } else {
        (
            ConditionStatus::False,
            "InvalidResources",
            problems.join("; "),
        )
    };
    // No `observedGeneration`: a bind moves the handle's generation and changes neither
    // condition, and recording that the pass saw it would cost a status write per bind
    // (docs/compatibility.md, "handle conditions").
    let mut conditions = current.conditions.clone().unwrap_or_default();
    for (type_, (status, reason, message)) in [(READY, ready_condition), (VALID, valid_condition)] {
        let desired = DesiredCondition {
            type_,
            status,
            reason,
            message,
            observed_generation: None,
        };
        set_condition(&mut conditions, desired, env.now);
    }

    DesiredStatus {
        status: ResourceHandleStatus {
            healthy,
            ready,
            summary,
            resources: Some(resources),
            conditions: Some(conditions),
        },
        failures,
    }
}

/// The message of a problem condition, if the `Valid` condition of `status` reports one.
pub(crate) fn problem_message(status: Option<&ResourceHandleStatus>) -> Option<&str> {
    conditions::problem(status.and_then(|s| s.conditions.as_deref()), VALID)
}

fn why_not_ready(
    plan: Option<&ResourcePlan>,
    has_state: bool,
    healthy: Option<bool>,
    ready: Option<bool>,
) -> &'static str {
    match plan {
        Some(ResourcePlan::WaitingForClaim) => "waiting for a ResourceClaim",
        Some(ResourcePlan::WaitingForLink { .. }) => "waiting for a linked resource",
        _ if !has_state => "not created yet",
        _ if healthy == Some(false) => "unhealthy",
        _ if ready == Some(false) => "not ready",
        _ => "readiness unknown",
    }
}

/// Poolboy's rule (Δ§3.2 update_status): false if any is false; else unknown if any is unknown
/// or there is nothing; else true.
fn overall(values: impl Iterator<Item = Option<bool>>) -> Option<bool> {
    let mut result = Some(true);
    let mut any = false;
    for value in values {
        any = true;
        match value {
            Some(false) => return Some(false),
            None => result = None,
            Some(true) => {}
        }
    }
    if any { result } else { None }
}

/// `healthCheck` or `readinessCheck` over the live object's top-level keys and
/// `resource_handle`, with the provider's vars as template variables (§5.7, Δ§2.6). Unset or
/// failing: unknown.
fn run_check(
    env: &PlanEnvironment<'_>,
    provider: &CompiledProvider,
    field: &str,
    state: &Value,
    handle_view: &TemplateValue,
    failures: &mut Vec<String>,
) -> Option<bool> {
    let spec = provider.spec();
    let check = match field {
        "healthCheck" => spec.health_check.as_ref(),
        _ => spec.readiness_check.as_ref(),
    }?;
    let variables = match state {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    let scope = RenderContext::new(env.render_at, &variables)
        .with_variable("resource_handle", handle_view)
        .with_template_variables(spec.vars.as_ref());
    match env.templates.check(check, &scope) {
        Ok(result) => Some(result),
        Err(error) => {
            failures.push(format!(
                "ResourceProvider {} {field} failed: {error}",
                provider.name()
            ));
            None
        }
    }
}

/// `statusSummaryTemplate` (Δ§3.2): the handle's `spec.provider.parameterValues` (without
/// defaults), `resource_handle`, and `resources` (the spec entries, each with its live `state`);
/// the provider's vars, then the handle's, as template variables. `Ok(None)` without template.
fn summary(
    env: &PlanEnvironment<'_>,
    handle: &ResourceHandle,
    provider: &CompiledProvider,
    states: &[Option<Value>],
    handle_view: &TemplateValue,
) -> Result<Option<Value>, String> {
    let Some(template) = &provider.spec().status_summary_template else {
        return Ok(None);
    };
    let entries = handle.spec.resources.as_deref().unwrap_or(&[]);
    let resources: Vec<Value> = entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let mut value = serde_json::to_value(entry).unwrap_or_else(|_| json!({}));
            if let Value::Object(map) = &mut value {
                let state = states.get(index).cloned().flatten();
                map.insert("state".to_owned(), state.unwrap_or(Value::Null));
            }
            value
        })
        .collect();
    let parameter_values = handle
        .spec
        .provider
        .as_ref()
        .and_then(|p| p.parameter_values.clone())
        .unwrap_or_default();
    let scope = RenderContext::new(env.render_at, &parameter_values)
        .with_variable("resource_handle", handle_view)
        .with_variable("resources", Value::Array(resources))
        .with_template_variables(provider.spec().vars.as_ref())
        .with_template_variables(handle.spec.vars.as_ref());
    env.templates
        .render(template, &scope)
        .map(Some)
        .map_err(|error| {
            format!(
                "ResourceProvider {} statusSummaryTemplate failed: {error}",
                provider.name()
            )
        })
}

/// The JSON-patch ops (on the status subresource) that turn `current` into `desired`, field by
/// field; empty when they are equal, or when only `resources[].name` differs: a bind puts the
/// claim's names in `spec.resources[].name`, and the status takes them with its next write for
/// another reason rather than with a write of its own (docs/compatibility.md, "handle status
/// names"). Fields this module does not own (`diffBase`, `kopf` left by Poolboy) are kept.
pub(crate) fn status_patch(
    current: Option<&ResourceHandleStatus>,
    desired: &ResourceHandleStatus,
) -> Vec<PatchOp> {
    let Some(current) = current else {
        return vec![PatchOp::Add {
            path: "/status".to_owned(),
            value: to_value(desired),
        }];
    };
    if same_apart_from_names(current, desired) {
        return Vec::new();
    }
    let mut ops = Vec::new();
    let mut field = |name: &str, current: Option<Value>, desired: Option<Value>| {
        let path = format!("/status/{}", escape_pointer_segment(name));
        match (current, desired) {
            (Some(_), None) => ops.push(PatchOp::Remove { path }),
            (current, Some(desired)) if current.as_ref() != Some(&desired) => {
                ops.push(PatchOp::Add {
                    path,
                    value: desired,
                })
            }
            _ => {}
        }
    };
    field(
        "resources",
        current.resources.as_ref().map(to_value),
        desired.resources.as_ref().map(to_value),
    );
    field(
        "healthy",
        current.healthy.map(Value::Bool),
        desired.healthy.map(Value::Bool),
    );
    field(
        "ready",
        current.ready.map(Value::Bool),
        desired.ready.map(Value::Bool),
    );
    field("summary", current.summary.clone(), desired.summary.clone());
    field(
        "conditions",
        current.conditions.as_ref().map(to_value),
        desired.conditions.as_ref().map(to_value),
    );
    ops
}

/// Whether `a` and `b` are the same status but for the names of their resources.
fn same_apart_from_names(a: &ResourceHandleStatus, b: &ResourceHandleStatus) -> bool {
    let ResourceHandleStatus {
        healthy,
        ready,
        summary,
        resources,
        conditions,
    } = a;
    let same_resources = match (resources, &b.resources) {
        (Some(a), Some(b)) => {
            a.len() == b.len()
                && a.iter().zip(b).all(|(a, b)| {
                    let HandleStatusResource {
                        healthy,
                        name: _,
                        ready,
                        reference,
                        waiting_for,
                    } = a;
                    (healthy, ready, reference, waiting_for)
                        == (&b.healthy, &b.ready, &b.reference, &b.waiting_for)
                })
        }
        (a, b) => a == b,
    };
    same_resources
        && (healthy, ready, summary, conditions)
            == (&b.healthy, &b.ready, &b.summary, &b.conditions)
}

fn to_value(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

//! Whether a managed resource is ready by its own status, read the way Kubernetes tooling
//! agrees on (kstatus: kpt, Flux, `helm --wait`), for the `Ready` condition of a handle whose
//! provider has no `readinessCheck`. Poolboy's `status.ready` stays the provider's alone.

use serde_json::Value;

/// A resource's readiness by its own status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Observed {
    Ready,
    /// Not ready, and why, in a phrase.
    NotReady(String),
}

/// The readiness of `resource` (its live object), as kstatus reads it: being deleted is never
/// ready; nor is a resource whose controller has not observed its generation yet, or that says
/// it is `Reconciling` or `Stalled`; then the well-known kinds by their own rule, and any other
/// kind by its `Ready` and `Available` conditions when it has them. A kind without a status
/// (ConfigMap, Secret) is ready once it exists.
pub(crate) fn observed(resource: &Value) -> Observed {
    if resource["metadata"]["deletionTimestamp"].is_string() {
        return Observed::NotReady("being deleted".to_owned());
    }
    let status = &resource["status"];
    if let (Some(observed), Some(generation)) = (
        status["observedGeneration"].as_i64(),
        resource["metadata"]["generation"].as_i64(),
    ) && observed < generation
    {
        return Observed::NotReady(format!(
            "its controller has observed generation {observed} of {generation}"
        ));
    }
    if let Some(not_ready) = [("Reconciling", "False"), ("Stalled", "False")]
        .into_iter()
        .find_map(|(type_, ready_when)| unless_condition(status, type_, ready_when))
    {
        return not_ready;
    }
    let group = resource["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(group, _)| group);
    match (group, resource["kind"].as_str().unwrap_or_default()) {
        ("apps", "Deployment") => deployment(resource, status),
        ("apps", "StatefulSet") => stateful_set(resource, status),
        ("batch", "Job") => job(status),
        ("", "Pod") => pod(status),
        ("", "PersistentVolumeClaim") => phase(status, "Bound"),
        ("", "Namespace") => phase(status, "Active"),
        _ => [("Ready", "True"), ("Available", "True")]
            .into_iter()
            .find_map(|(type_, ready_when)| unless_condition(status, type_, ready_when))
            .unwrap_or(Observed::Ready),
    }
}

/// Not ready when `status` has a condition `type_` whose status is not `ready_when`.
fn unless_condition(status: &Value, type_: &str, ready_when: &str) -> Option<Observed> {
    let condition = condition(status, type_)?;
    let status = condition["status"].as_str().unwrap_or("Unknown");
    if status == ready_when {
        return None;
    }
    let message = condition["message"].as_str().filter(|m| !m.is_empty());
    let reason = condition["reason"].as_str().filter(|r| !r.is_empty());
    let detail = message
        .or(reason)
        .map_or(String::new(), |d| format!(": {d}"));
    Some(Observed::NotReady(format!(
        "condition {type_} is {status}{detail}"
    )))
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn count(status: &Value, field: &str) -> i64 {
    status[field].as_i64().unwrap_or(0)
}

/// The replicas a workload asks for (1 when unset, as the API server defaults it).
fn wanted_replicas(resource: &Value) -> i64 {
    resource["spec"]["replicas"].as_i64().unwrap_or(1)
}

/// Every replica updated, available and none left over from the last rollout.
fn deployment(resource: &Value, status: &Value) -> Observed {
    let wanted = wanted_replicas(resource);
    if condition(status, "Progressing").is_some_and(|c| c["reason"] == "ProgressDeadlineExceeded") {
        return Observed::NotReady("its rollout exceeded its progress deadline".to_owned());
    }
    for (field, what) in [
        ("updatedReplicas", "updated"),
        ("availableReplicas", "available"),
    ] {
        if count(status, field) < wanted {
            return Observed::NotReady(format!(
                "{} of {wanted} replicas {what}",
                count(status, field)
            ));
        }
    }
    if count(status, "replicas") > wanted {
        return Observed::NotReady(format!(
            "{} old replicas still terminating",
            count(status, "replicas") - wanted
        ));
    }
    Observed::Ready
}

/// Every replica ready and, for a rolling update, of the update revision.
fn stateful_set(resource: &Value, status: &Value) -> Observed {
    let wanted = wanted_replicas(resource);
    if count(status, "readyReplicas") < wanted {
        return Observed::NotReady(format!(
            "{} of {wanted} replicas ready",
            count(status, "readyReplicas")
        ));
    }
    let on_delete = resource["spec"]["updateStrategy"]["type"] == "OnDelete";
    if !on_delete && status["updateRevision"] != status["currentRevision"] {
        return Observed::NotReady(format!(
            "{} of {wanted} replicas updated",
            count(status, "updatedReplicas")
        ));
    }
    Observed::Ready
}

/// Complete. A Job that runs is not ready yet: a claim of one waits for its result.
fn job(status: &Value) -> Observed {
    let holds = |type_: &str| condition(status, type_).is_some_and(|c| c["status"] == "True");
    if holds("Complete") {
        Observed::Ready
    } else if holds("Failed") {
        let message = condition(status, "Failed")
            .and_then(|c| c["message"].as_str())
            .filter(|m| !m.is_empty());
        Observed::NotReady(message.map_or("failed".to_owned(), |m| format!("failed: {m}")))
    } else {
        Observed::NotReady(format!("running ({} active)", count(status, "active")))
    }
}

/// Succeeded, or running with its `Ready` condition true.
fn pod(status: &Value) -> Observed {
    match status["phase"].as_str().unwrap_or("Pending") {
        "Succeeded" => Observed::Ready,
        "Running" if condition(status, "Ready").is_some_and(|c| c["status"] == "True") => {
            Observed::Ready
        }
        phase => Observed::NotReady(format!("phase {phase}, not Ready")),
    }
}

fn phase(status: &Value, ready: &str) -> Observed {
    match status["phase"].as_str() {
        Some(phase) if phase == ready => Observed::Ready,
        phase => Observed::NotReady(format!("phase {}", phase.unwrap_or("unknown"))),
    }
}

#[cfg(test)]
mod tests;

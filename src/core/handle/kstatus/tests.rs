use serde_json::{Value, json};

use super::*;

fn not_ready(resource: Value) -> String {
    match observed(&resource) {
        Observed::NotReady(why) => why,
        Observed::Ready => panic!("ready: {resource}"),
    }
}

fn ready(resource: Value) -> bool {
    observed(&resource) == Observed::Ready
}

#[test]
fn a_kind_without_a_status_is_ready_once_it_exists() {
    assert!(ready(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
        "data": {"k": "v"}})
    ));
    assert!(ready(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}})
    ));
    assert_eq!(
        not_ready(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "deletionTimestamp": "2026-11-27T10:00:00Z"}})),
        "being deleted"
    );
}

#[test]
fn any_kind_waits_for_its_generation_and_its_conditions() {
    let subject = |status: Value, generation: i64| {
        json!({"apiVersion": "anarchy.gpte.redhat.com/v1", "kind": "AnarchySubject",
            "metadata": {"name": "lab", "generation": generation}, "status": status})
    };
    assert!(ready(subject(json!({"towerJobs": {}}), 3)));
    assert_eq!(
        not_ready(subject(json!({"observedGeneration": 2}), 3)),
        "its controller has observed generation 2 of 3"
    );
    assert!(ready(subject(json!({"observedGeneration": 3}), 3)));
    assert_eq!(
        not_ready(subject(
            json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Provisioning",
                "message": "waiting for the cloud"}]}),
            1
        )),
        "condition Ready is False: waiting for the cloud"
    );
    assert_eq!(
        not_ready(subject(
            json!({"conditions": [{"type": "Available", "status": "Unknown",
                "reason": "Starting"}]}),
            1
        )),
        "condition Available is Unknown: Starting"
    );
    assert_eq!(
        not_ready(subject(
            json!({"conditions": [{"type": "Reconciling", "status": "True"}]}),
            1
        )),
        "condition Reconciling is True"
    );
    assert!(ready(subject(
        json!({"conditions": [{"type": "Ready", "status": "True"},
            {"type": "Stalled", "status": "False"}]}),
        1
    )));
}

fn deployment(spec_replicas: Option<i64>, status: Value) -> Value {
    let mut spec = json!({});
    if let Some(replicas) = spec_replicas {
        spec["replicas"] = json!(replicas);
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "generation": 2}, "spec": spec, "status": status})
}

#[test]
fn a_deployment_is_ready_when_every_replica_is_updated_and_available() {
    let done = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
        "availableReplicas": 3, "readyReplicas": 3,
        "conditions": [{"type": "Available", "status": "True"}]});
    assert!(ready(deployment(Some(3), done.clone())));
    assert_eq!(
        not_ready(deployment(
            Some(3),
            json!({"observedGeneration": 2, "replicas": 3,
            "updatedReplicas": 3, "availableReplicas": 1})
        )),
        "1 of 3 replicas available"
    );
    assert_eq!(
        not_ready(deployment(
            Some(3),
            json!({"observedGeneration": 2, "replicas": 4,
            "updatedReplicas": 3, "availableReplicas": 3})
        )),
        "1 old replicas still terminating"
    );
    assert_eq!(
        not_ready(deployment(None, json!({"observedGeneration": 2}))),
        "0 of 1 replicas updated",
        "replicas default to 1"
    );
    let mut stale = done;
    stale["observedGeneration"] = json!(1);
    assert!(not_ready(deployment(Some(3), stale)).contains("generation 1 of 2"));
    assert_eq!(
        not_ready(deployment(
            Some(1),
            json!({"conditions": [{"type": "Progressing",
            "status": "False", "reason": "ProgressDeadlineExceeded"}]})
        )),
        "its rollout exceeded its progress deadline"
    );
}

#[test]
fn a_stateful_set_is_ready_when_every_replica_is_ready_and_updated() {
    let set = |status: Value, strategy: &str| {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
            "spec": {"replicas": 2, "updateStrategy": {"type": strategy}}, "status": status})
    };
    assert!(ready(set(
        json!({"readyReplicas": 2, "updatedReplicas": 2, "currentRevision": "r2",
            "updateRevision": "r2"}),
        "RollingUpdate"
    )));
    assert_eq!(
        not_ready(set(json!({"readyReplicas": 1}), "RollingUpdate")),
        "1 of 2 replicas ready"
    );
    assert_eq!(
        not_ready(set(
            json!({"readyReplicas": 2, "updatedReplicas": 1, "currentRevision": "r1",
                "updateRevision": "r2"}),
            "RollingUpdate"
        )),
        "1 of 2 replicas updated"
    );
    assert!(ready(set(
        json!({"readyReplicas": 2, "currentRevision": "r1", "updateRevision": "r2"}),
        "OnDelete"
    )));
}

#[test]
fn a_job_is_ready_once_complete() {
    let job = |status: Value| {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "status": status})
    };
    assert!(ready(job(
        json!({"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1})
    )));
    assert_eq!(not_ready(job(json!({"active": 1}))), "running (1 active)");
    assert_eq!(
        not_ready(job(
            json!({"conditions": [{"type": "Failed", "status": "True",
            "message": "BackoffLimitExceeded"}]})
        )),
        "failed: BackoffLimitExceeded"
    );
}

#[test]
fn pods_claims_and_namespaces_by_their_phase() {
    let pod = |phase: &str, ready: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}})
    };
    assert!(ready(pod("Running", "True")));
    assert!(ready(pod("Succeeded", "False")));
    assert_eq!(
        not_ready(pod("Running", "False")),
        "phase Running, not Ready"
    );
    assert_eq!(
        not_ready(pod("Pending", "False")),
        "phase Pending, not Ready"
    );

    let pvc = |phase: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
            "status": {"phase": phase}})
    };
    assert!(ready(pvc("Bound")));
    assert_eq!(not_ready(pvc("Pending")), "phase Pending");

    let namespace = |status: Value| {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"},
            "status": status})
    };
    assert!(ready(namespace(json!({"phase": "Active"}))));
    assert_eq!(
        not_ready(namespace(json!({"phase": "Terminating"}))),
        "phase Terminating"
    );
    assert_eq!(not_ready(namespace(json!({}))), "phase unknown");
}

#[test]
fn a_kind_of_another_group_is_not_taken_for_a_well_known_one() {
    // Only apps/v1 Deployments follow the Deployment rule.
    assert!(ready(
        json!({"apiVersion": "example.com/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"replicas": 3}, "status": {}})
    ));
}

use chrono::TimeDelta;
use serde_json::json;

use super::*;
use crate::core::test_fixtures::{claim, handle, now, patch_json, provider_ref};

fn desired(name: &str, provider: &str) -> DesiredResource {
    DesiredResource {
        name: name.into(),
        provider: provider_ref(provider),
        template: json!({}),
    }
}

const POOL_HANDLE: &str = r#"
metadata:
  name: guid-abcde
  labels: {poolboy.gpte.redhat.com/resource-pool-name: gold}
spec:
  resourcePool: {apiVersion: poolboy.gpte.redhat.com/v1, kind: ResourcePool, name: gold, namespace: poolboy}
  resources:
  - provider: {apiVersion: poolboy.gpte.redhat.com/v1, kind: ResourceProvider, name: lab, namespace: poolboy}
  lifespan: {default: 2h, end: "2026-11-21T13:00:00Z"}
"#;

fn claim_c() -> ResourceClaim {
    claim("metadata: {name: c, namespace: user1}\nspec: {provider: {name: lab}}")
}

fn ops(plan: &BindPlan) -> Vec<(String, String)> {
    patch_json(&plan.patch)
        .as_array()
        .unwrap()
        .iter()
        .map(|op| {
            (
                op["op"].as_str().unwrap().to_owned(),
                op["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn limits(default: Option<TimeDelta>) -> LifespanLimits {
    LifespanLimits {
        default,
        ..Default::default()
    }
}

#[test]
fn the_bind_patch_is_guarded_and_in_poolboy_order() {
    let provider = ProviderParameters {
        name: "lab".into(),
        parameter_values: Some(serde_json::Map::from_iter([
            ("region".to_owned(), json!("eu")),
            ("size".to_owned(), json!(2)),
        ])),
    };
    let plan = bind_patch(
        &handle(POOL_HANDLE),
        &claim_c(),
        &[desired("lab", "lab"), desired("", "db")],
        Some(&provider),
        &limits(Some(TimeDelta::hours(2))),
        &OperatorDomain::default(),
        now(),
    )
    .unwrap();
    assert_eq!(
        patch_json(&plan.patch),
        json!([
            {"op": "test", "path": "/spec/resourceClaim", "value": null},
            {"op": "test", "path": "/metadata/deletionTimestamp", "value": null},
            {"op": "add", "path": "/metadata/labels/poolboy.gpte.redhat.com~1resource-claim-name", "value": "c"},
            {"op": "add", "path": "/metadata/labels/poolboy.gpte.redhat.com~1resource-claim-namespace", "value": "user1"},
            {"op": "add", "path": "/spec/resourceClaim", "value": {
                "apiVersion": "poolboy.gpte.redhat.com/v1",
                "kind": "ResourceClaim",
                "name": "c",
                "namespace": "user1",
            }},
            // Δ B20: the effective values, defaults included.
            {"op": "add", "path": "/spec/provider", "value": {
                "name": "lab",
                "parameterValues": {"region": "eu", "size": 2},
            }},
            {"op": "add", "path": "/spec/resources/0/name", "value": "lab"},
            {"op": "add", "path": "/spec/resources/-", "value": {"provider": provider_ref("db")}},
            {"op": "add", "path": "/spec/lifespan/end", "value": "2026-11-21T14:00:00Z"},
        ])
    );
    assert_eq!(plan.rewrite_requested_end, None);
}

#[test]
fn the_labels_map_is_created_when_the_handle_has_none() {
    let handle = handle(
        "metadata: {name: guid-a}\nspec: {resources: [{name: x, provider: {apiVersion: v, kind: ResourceProvider, name: p, namespace: poolboy}}]}",
    );
    let plan = bind_patch(
        &handle,
        &claim_c(),
        &[desired("x", "p")],
        None,
        &limits(None),
        &OperatorDomain::default(),
        now(),
    )
    .unwrap();
    assert_eq!(
        ops(&plan),
        [
            ("test", "/spec/resourceClaim"),
            ("test", "/metadata/deletionTimestamp"),
            ("add", "/metadata/labels"),
            (
                "add",
                "/metadata/labels/poolboy.gpte.redhat.com~1resource-claim-name"
            ),
            (
                "add",
                "/metadata/labels/poolboy.gpte.redhat.com~1resource-claim-namespace"
            ),
            ("add", "/spec/resourceClaim"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(patch_json(&plan.patch)[2]["value"], json!({}));
}

#[test]
fn a_named_extra_resource_is_appended_with_its_name() {
    let plan = bind_patch(
        &handle(POOL_HANDLE),
        &claim_c(),
        &[desired("", "lab"), desired("db", "db")],
        None,
        &limits(None),
        &OperatorDomain::default(),
        now(),
    )
    .unwrap();
    let patch = patch_json(&plan.patch);
    let appended: Vec<&Value> = patch
        .as_array()
        .unwrap()
        .iter()
        .filter(|op| op["path"] == "/spec/resources/-")
        .collect();
    assert_eq!(
        appended,
        [
            &json!({"op": "add", "path": "/spec/resources/-", "value": {"provider": provider_ref("db"), "name": "db"}})
        ]
    );
    // An unnamed claim resource leaves the handle's name alone.
    assert!(!ops(&plan).iter().any(|(_, path)| path.ends_with("/name")));
}

#[test]
fn a_handle_without_resources_gets_the_list_before_the_appends() {
    // A pool handle with `spec.provider` has no resources until its first reconcile; an
    // append to a missing list would fail the whole bind.
    let handle = handle("metadata: {name: guid-a, labels: {}}\nspec: {provider: {name: lab}}");
    let plan = bind_patch(
        &handle,
        &claim_c(),
        &[desired("lab", "lab")],
        None,
        &limits(None),
        &OperatorDomain::default(),
        now(),
    )
    .unwrap();
    let mut document = serde_json::to_value(&handle).unwrap();
    // The guards pass on the API server when their paths are absent; leave them out here.
    let ops: Vec<_> = plan.patch.0[2..].to_vec();
    json_patch::patch(&mut document, &ops).unwrap();
    assert_eq!(
        document["spec"]["resources"],
        json!([{"provider": provider_ref("lab"), "name": "lab"}])
    );
}

#[test]
fn a_default_lifespan_adds_the_whole_lifespan_when_absent() {
    let handle = handle("metadata: {name: guid-a, labels: {}}\nspec: {resources: []}");
    let plan = bind_patch(
        &handle,
        &claim_c(),
        &[],
        None,
        &limits(Some(TimeDelta::hours(3))),
        &OperatorDomain::default(),
        now(),
    )
    .unwrap();
    let patch = patch_json(&plan.patch);
    assert_eq!(
        patch.as_array().unwrap().last().unwrap(),
        &json!({"op": "add", "path": "/spec/lifespan", "value": {"end": "2026-11-21T15:00:00Z"}})
    );
}

#[test]
fn without_a_default_the_unclaimed_end_of_a_pool_handle_is_removed() {
    let plan = bind_patch(
        &handle(POOL_HANDLE),
        &claim_c(),
        &[desired("", "lab")],
        None,
        &limits(None),
        &OperatorDomain::default(),
        now(),
    )
    .unwrap();
    assert_eq!(
        ops(&plan).last().unwrap(),
        &("remove".to_owned(), "/spec/lifespan/end".to_owned())
    );
    // No end to remove, no op.
    let no_end = handle(&POOL_HANDLE.replace(", end: \"2026-11-21T13:00:00Z\"", ""));
    let plan = bind_patch(
        &no_end,
        &claim_c(),
        &[desired("", "lab")],
        None,
        &limits(None),
        &OperatorDomain::default(),
        now(),
    )
    .unwrap();
    assert_eq!(ops(&plan).last().unwrap().1, "/spec/resourceClaim");
}

#[test]
fn a_requested_end_is_clamped_and_written_back() {
    let claim = claim(
        "metadata: {name: c, namespace: user1}\nspec: {provider: {name: lab}, lifespan: {end: '2026-12-01T00:00:00Z'}}",
    );
    let bind = |limits: &LifespanLimits| {
        bind_patch(
            &handle(POOL_HANDLE),
            &claim,
            &[desired("", "lab")],
            None,
            limits,
            &OperatorDomain::default(),
            now(),
        )
        .unwrap()
    };
    let last_value = |plan: &BindPlan| {
        patch_json(&plan.patch).as_array().unwrap().last().unwrap()["value"].clone()
    };
    // A request past `maximum` is cut to start + maximum; the request itself may stay,
    // since that bound does not move.
    let plan = bind(&LifespanLimits {
        default: Some(TimeDelta::hours(2)),
        maximum: Some(TimeDelta::days(1)),
        relative_maximum: None,
    });
    assert_eq!(last_value(&plan), "2026-11-22T12:00:00Z");
    assert_eq!(plan.rewrite_requested_end, None);
    // Past relativeMaximum the request is rewritten, or it would slide forward for ever.
    let plan = bind(&LifespanLimits {
        default: None,
        maximum: Some(TimeDelta::days(3)),
        relative_maximum: Some(TimeDelta::hours(12)),
    });
    assert_eq!(last_value(&plan), "2026-11-22T00:00:00Z");
    assert_eq!(
        plan.rewrite_requested_end,
        Some("2026-11-22T00:00:00Z".parse().unwrap())
    );
    // A request within the limits is taken as is.
    let plan = bind(&LifespanLimits {
        default: Some(TimeDelta::hours(2)),
        maximum: Some(TimeDelta::days(30)),
        relative_maximum: None,
    });
    assert_eq!(last_value(&plan), "2026-12-01T00:00:00Z");
}

#[test]
fn the_unbind_patch_is_guarded_by_the_claim_removes_its_labels_and_marks_the_handle() {
    let domain = OperatorDomain::default();
    let bound = handle(
        r#"
metadata:
  name: guid-abcde
  labels:
    poolboy.gpte.redhat.com/resource-claim-name: c
    poolboy.gpte.redhat.com/resource-claim-namespace: user1
    poolboy.gpte.redhat.com/resource-pool-name: gold
spec:
  resourceClaim: {apiVersion: poolboy.gpte.redhat.com/v1, kind: ResourceClaim, name: c, namespace: user1}
"#,
    );
    let patch = patch_json(&unbind_patch(&bound, &claim_c(), &domain));
    assert_eq!(
        patch,
        json!([
            {"op": "test", "path": "/spec/resourceClaim", "value": {
                "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
                "name": "c", "namespace": "user1"}},
            {"op": "remove", "path": "/spec/resourceClaim"},
            {"op": "remove",
             "path": "/metadata/labels/poolboy.gpte.redhat.com~1resource-claim-name"},
            {"op": "remove",
             "path": "/metadata/labels/poolboy.gpte.redhat.com~1resource-claim-namespace"},
            {"op": "test", "path": "/metadata/annotations", "value": null},
            {"op": "add", "path": "/metadata/annotations",
             "value": {"poolboy.gpte.redhat.com/released-from-claim": "user1/c"}},
        ])
    );
    // Labels it does not have are not removed: a remove of a missing path fails the patch.
    // An annotations map it has gets one more key.
    let unlabelled = handle("metadata: {name: guid-abcde, annotations: {note: kept}}\nspec: {}");
    let ops = patch_json(&unbind_patch(&unlabelled, &claim_c(), &domain));
    assert_eq!(
        ops.as_array()
            .map(|ops| ops.iter().map(|op| op["op"].clone()).collect()),
        Some(vec![json!("test"), json!("remove"), json!("add")]),
        "{ops}"
    );
    assert_eq!(
        ops[2]["path"],
        "/metadata/annotations/poolboy.gpte.redhat.com~1released-from-claim"
    );
}

#[test]
fn a_bad_requested_end_is_an_error() {
    let claim =
        claim("metadata: {name: c}\nspec: {provider: {name: lab}, lifespan: {end: 'tomorrow'}}");
    let result = bind_patch(
        &handle(POOL_HANDLE),
        &claim,
        &[],
        None,
        &limits(None),
        &OperatorDomain::default(),
        now(),
    );
    assert!(result.is_err());
}

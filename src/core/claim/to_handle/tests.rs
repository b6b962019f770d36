use chrono::TimeDelta;
use serde_json::json;

use super::*;
use crate::core::test_fixtures::{claim, handle, now, patch_json, provider_ref};

fn propagate(
    claim: &ResourceClaim,
    shape: ClaimShape,
    handle: &ResourceHandle,
    provider: Option<&ProviderParameters>,
    limits: &LifespanLimits,
) -> Propagation {
    let providers = [provider_ref("a"), provider_ref("b"), provider_ref("c")];
    propagate_claim_to_handle(claim, shape, handle, provider, &providers, limits, now()).unwrap()
}

fn parameters(yaml_values: serde_json::Value) -> ProviderParameters {
    ProviderParameters {
        name: "lab".into(),
        parameter_values: yaml_values.as_object().cloned(),
    }
}

#[test]
fn a_changed_provider_is_set_on_the_handle() {
    let claim = claim("metadata: {name: c}\nspec: {provider: {name: lab}}");
    let handle = handle(
        "metadata: {name: guid-a}\nspec: {provider: {name: lab, parameterValues: {size: 2}}}",
    );
    let changed = parameters(json!({"size": 4}));
    let result = propagate(
        &claim,
        ClaimShape::Provider,
        &handle,
        Some(&changed),
        &LifespanLimits::default(),
    );
    assert_eq!(
        patch_json(&result.patch),
        json!([{"op": "add", "path": "/spec/provider", "value": {"name": "lab", "parameterValues": {"size": 4}}}])
    );
    let same = parameters(json!({"size": 2}));
    let result = propagate(
        &claim,
        ClaimShape::Provider,
        &handle,
        Some(&same),
        &LifespanLimits::default(),
    );
    assert_eq!(patch_json(&result.patch), json!([]));
}

const HANDLE: &str = r#"
metadata: {name: guid-a}
spec:
  provider: {name: stale}
  resources:
  - provider: {apiVersion: poolboy.gpte.redhat.com/v1, kind: ResourceProvider, name: a, namespace: poolboy}
    template:
      data: {color: blue, handle-only: kept}
      list: [1, 2, 3]
  - provider: {apiVersion: poolboy.gpte.redhat.com/v1, kind: ResourceProvider, name: b, namespace: poolboy}
    template: {data: {same: yes}}
"#;

#[test]
fn a_resources_claim_merges_templates_and_appends_resources() {
    let claim = claim(
        r#"
metadata: {name: c}
spec:
  resources:
  - template:
      data: {color: red}
      list: [9]
  - template: {data: {same: yes}}
  - name: extra
    template: {kind: Secret}
"#,
    );
    let result = propagate(
        &claim,
        ClaimShape::Resources,
        &handle(HANDLE),
        None,
        &LifespanLimits::default(),
    );
    assert_eq!(
        patch_json(&result.patch),
        json!([
            {"op": "remove", "path": "/spec/provider"},
            // Claim values overwrite, handle-only keys stay, lists merge by index.
            {"op": "add", "path": "/spec/resources/0/template", "value": {
                "data": {"color": "red", "handle-only": "kept"},
                "list": [9, 2, 3],
            }},
            {"op": "add", "path": "/spec/resources/-", "value": {
                "provider": provider_ref("c"),
                "name": "extra",
                "template": {"kind": "Secret"},
            }},
        ])
    );
    assert_eq!(result.rewrite_requested_end, None);
}

#[test]
fn an_unchanged_claim_gives_an_empty_patch() {
    let claim =
        claim("metadata: {name: c}\nspec: {resources: [{template: {data: {color: blue}}}, {}]}");
    let mut handle = handle(HANDLE);
    handle.spec.provider = None;
    let result = propagate(
        &claim,
        ClaimShape::Resources,
        &handle,
        None,
        &LifespanLimits::default(),
    );
    assert_eq!(patch_json(&result.patch), json!([]));
}

#[test]
fn equal_by_python_equality_is_unchanged() {
    // 2 == 2.0 in Poolboy's comparison: no patch.
    let claim = claim("metadata: {name: c}\nspec: {resources: [{template: {n: 2.0}}]}");
    let handle = handle(
        "metadata: {name: guid-a}\nspec: {resources: [{provider: {apiVersion: v, kind: ResourceProvider, name: a, namespace: poolboy}, template: {n: 2}}]}",
    );
    let result = propagate(
        &claim,
        ClaimShape::Resources,
        &handle,
        None,
        &LifespanLimits::default(),
    );
    assert_eq!(patch_json(&result.patch), json!([]));
}

#[test]
fn a_handle_without_resources_gets_the_list_first() {
    let claim = claim("metadata: {name: c}\nspec: {resources: [{template: {kind: A}}]}");
    let handle = handle("metadata: {name: guid-a}\nspec: {}");
    let result = propagate(
        &claim,
        ClaimShape::Resources,
        &handle,
        None,
        &LifespanLimits::default(),
    );
    assert_eq!(
        patch_json(&result.patch),
        json!([
            {"op": "add", "path": "/spec/resources", "value": []},
            {"op": "add", "path": "/spec/resources/-", "value": {"provider": provider_ref("a"), "template": {"kind": "A"}}},
        ])
    );
}

fn lifespan_claim(end: &str) -> ResourceClaim {
    claim(&format!(
        "metadata: {{name: c, creationTimestamp: '2026-11-21T10:00:00Z'}}\n\
             spec: {{provider: {{name: lab}}, lifespan: {{end: '{end}'}}}}\n\
             status: {{lifespan: {{start: '2026-11-21T11:00:00Z'}}}}"
    ))
}

#[test]
fn a_requested_end_is_clamped_to_the_maximum() {
    let handle =
        handle("metadata: {name: guid-a}\nspec: {lifespan: {end: '2026-11-21T14:00:00Z'}}");
    let limits = LifespanLimits {
        default: None,
        maximum: Some(TimeDelta::days(1)),
        relative_maximum: None,
    };
    let result = propagate(
        &lifespan_claim("2026-12-01T00:00:00Z"),
        ClaimShape::Provider,
        &handle,
        None,
        &limits,
    );
    // Anchored at the claim's lifespan start.
    assert_eq!(
        patch_json(&result.patch),
        json!([{"op": "add", "path": "/spec/lifespan/end", "value": "2026-11-22T11:00:00Z"}])
    );
    assert_eq!(result.rewrite_requested_end, None);

    let limits = LifespanLimits {
        default: None,
        maximum: None,
        relative_maximum: Some(TimeDelta::hours(6)),
    };
    let result = propagate(
        &lifespan_claim("2026-12-01T00:00:00Z"),
        ClaimShape::Provider,
        &handle,
        None,
        &limits,
    );
    assert_eq!(
        result.rewrite_requested_end,
        Some("2026-11-21T18:00:00Z".parse().unwrap())
    );
}

#[test]
fn the_lifespan_is_added_when_missing_and_left_alone_when_equal() {
    let no_lifespan = handle("metadata: {name: guid-a}\nspec: {}");
    let result = propagate(
        &lifespan_claim("2026-11-21T20:00:00Z"),
        ClaimShape::Provider,
        &no_lifespan,
        None,
        &LifespanLimits::default(),
    );
    assert_eq!(
        patch_json(&result.patch),
        json!([{"op": "add", "path": "/spec/lifespan", "value": {"end": "2026-11-21T20:00:00Z"}}])
    );
    // The same instant written differently is no change.
    let same = handle(
        "metadata: {name: guid-a}\nspec: {lifespan: {default: 1h, end: '2026-11-21T20:00:00+00:00'}}",
    );
    let result = propagate(
        &lifespan_claim("2026-11-21T20:00:00Z"),
        ClaimShape::Provider,
        &same,
        None,
        &LifespanLimits::default(),
    );
    assert_eq!(patch_json(&result.patch), json!([]));
    // A lifespan without end gets one.
    let no_end = handle("metadata: {name: guid-a}\nspec: {lifespan: {default: 1h}}");
    let result = propagate(
        &lifespan_claim("2026-11-21T20:00:00Z"),
        ClaimShape::Provider,
        &no_end,
        None,
        &LifespanLimits::default(),
    );
    assert_eq!(
        patch_json(&result.patch),
        json!([{"op": "add", "path": "/spec/lifespan/end", "value": "2026-11-21T20:00:00Z"}])
    );
}

#[test]
fn no_requested_end_leaves_the_handle_lifespan() {
    let claim = claim("metadata: {name: c}\nspec: {provider: {name: lab}}");
    let handle =
        handle("metadata: {name: guid-a}\nspec: {lifespan: {end: '2026-11-21T14:00:00Z'}}");
    let result = propagate(
        &claim,
        ClaimShape::Provider,
        &handle,
        None,
        &LifespanLimits {
            relative_maximum: Some(TimeDelta::minutes(1)),
            ..Default::default()
        },
    );
    assert_eq!(patch_json(&result.patch), json!([]));
}

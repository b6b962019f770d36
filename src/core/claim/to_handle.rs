//! Claim edits reaching the bound handle (§7 step 11): the provider (with effective values),
//! resources-claim templates merged over the handle's, extra resources, and the requested
//! lifespan end clamped to the maximums. Update filters do not apply here; they apply from
//! handle to resource (§12.2).

use chrono::{DateTime, Utc};
use json_patch::{Patch, PatchOperation, RemoveOperation};
use serde_json::{Value, json};

use crate::api::refs::ProviderParameters;
use crate::api::{ResourceClaim, ResourceHandle};
use crate::core::claim::providers::ClaimShape;
use crate::core::json::merge::{MergeMode, deep_merge};
use crate::core::json::patch::values_equal;
use crate::core::json::pointer::{add, pointer};
use crate::core::lifespan::{self, LifespanError, LifespanLimits, format_timestamp};

/// The handle patch (empty when nothing differs) and the claim's rewritten requested end.
#[derive(Debug, Clone, Default)]
pub(crate) struct Propagation {
    pub patch: Patch,
    pub rewrite_requested_end: Option<DateTime<Utc>>,
}

/// What the handle should receive from `claim`. `provider` is the claim's effective provider
/// (provider claims); `claim_providers` the provider reference of each claim resource
/// (resources claims); `limits` the handle's lifespan evaluated for the claim.
pub(crate) fn propagate_claim_to_handle(
    claim: &ResourceClaim,
    shape: ClaimShape,
    handle: &ResourceHandle,
    provider: Option<&ProviderParameters>,
    claim_providers: &[crate::api::refs::ObjectRef],
    limits: &LifespanLimits,
    now: DateTime<Utc>,
) -> Result<Propagation, LifespanError> {
    let mut ops = Vec::new();
    match shape {
        ClaimShape::Provider => {
            if let Some(provider) = provider
                && handle.spec.provider.as_ref() != Some(provider)
            {
                ops.push(add(&["spec", "provider"], json!(provider)));
            }
        }
        ClaimShape::Resources => {
            if handle.spec.provider.is_some() {
                ops.push(PatchOperation::Remove(RemoveOperation {
                    path: pointer(&["spec", "provider"]),
                }));
            }
            let handle_resources = handle.spec.resources.as_deref().unwrap_or(&[]);
            let claim_resources = claim.spec.resources.as_deref().unwrap_or(&[]);
            if handle.spec.resources.is_none() && !claim_resources.is_empty() {
                ops.push(add(&["spec", "resources"], json!([])));
            }
            for (index, resource) in claim_resources.iter().enumerate() {
                let index_text = index.to_string();
                let existing = handle_resources.get(index);
                if existing.is_none() {
                    let Some(provider) = claim_providers.get(index) else {
                        continue;
                    };
                    let mut entry = json!({ "provider": provider });
                    if let Some(name) = &resource.name {
                        entry["name"] = json!(name);
                    }
                    if let Some(template) = &resource.template {
                        entry["template"] = template.clone();
                    }
                    ops.push(add(&["spec", "resources", "-"], entry));
                    continue;
                }
                let Some(claim_template) = &resource.template else {
                    continue;
                };
                let current = existing
                    .and_then(|r| r.template.clone())
                    .unwrap_or_else(|| json!({}));
                let mut merged = current.clone();
                deep_merge(&mut merged, claim_template, MergeMode::Overwrite);
                if !values_equal(&merged, &current) {
                    ops.push(add(&["spec", "resources", &index_text, "template"], merged));
                }
            }
        }
    }

    let clamped = lifespan::clamp_requested_end(claim, limits, now)?;
    if let Some(clamped) = clamped {
        let end = format_timestamp(clamped.end);
        let current = handle.spec.lifespan.as_ref().and_then(|l| l.end.as_deref());
        match (&handle.spec.lifespan, current) {
            (None, _) => ops.push(add(&["spec", "lifespan"], json!({ "end": end }))),
            (Some(_), Some(current)) if same_instant(current, &end) => {}
            (Some(_), _) => ops.push(add(&["spec", "lifespan", "end"], Value::String(end))),
        }
    }
    Ok(Propagation {
        patch: Patch(ops),
        rewrite_requested_end: clamped.filter(|c| c.rewrite_request).map(|c| c.end),
    })
}

fn same_instant(a: &str, b: &str) -> bool {
    match (
        lifespan::parse_timestamp("end", a),
        lifespan::parse_timestamp("end", b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
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
        propagate_claim_to_handle(claim, shape, handle, provider, &providers, limits, now())
            .unwrap()
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
        let claim = claim(
            "metadata: {name: c}\nspec: {resources: [{template: {data: {color: blue}}}, {}]}",
        );
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
}

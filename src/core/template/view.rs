//! How claims, handles and providers look to templates.
//!
//! Poolboy hands templates Python wrapper objects, and provider templates in the field reach
//! them through attributes (`resource_claim.metadata.namespace`, `resource_claim.annotations`,
//! `resource_handle.spec.vars`, `resource_provider.name`, …; §5.7). A view is the object's JSON
//! with those attributes added beside `apiVersion`, `kind`, `metadata`, `spec` and `status`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::Resource;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{TemplateEngine, TemplateValue};
use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle, ResourceProvider};

/// The objects a template may refer to at one call site: `resource_claim` and
/// `resource_handle` (null where there is none, like Poolboy's `None`) and the handle's `vars`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Subjects {
    pub claim: TemplateValue,
    pub handle: TemplateValue,
    pub handle_vars: Option<Map<String, Value>>,
}

impl Subjects {
    pub(crate) fn new(
        claim: Option<&ResourceClaim>,
        handle: Option<&ResourceHandle>,
        domain: &OperatorDomain,
    ) -> Self {
        Self::with_note(claim, handle, domain, None)
    }

    /// [`Subjects::new`], the claim's view noting with `templates` when a template reads it
    /// (`TemplateEngine::claim_read`): a handle whose templates never read their claim has
    /// nothing to render again when only the claim's status changes.
    pub(crate) fn noting(
        claim: Option<&ResourceClaim>,
        handle: Option<&ResourceHandle>,
        domain: &OperatorDomain,
        templates: &TemplateEngine,
    ) -> Self {
        Self::with_note(claim, handle, domain, templates.claim_note())
    }

    fn with_note(
        claim: Option<&ResourceClaim>,
        handle: Option<&ResourceHandle>,
        domain: &OperatorDomain,
        note: Option<Arc<AtomicBool>>,
    ) -> Self {
        Self {
            claim: claim.map_or_else(TemplateValue::default, |c| {
                deferred_view(c, domain, claim_view, note)
            }),
            handle: handle.map_or_else(TemplateValue::default, |h| handle_value(h, domain)),
            handle_vars: handle.and_then(|h| h.spec.vars.clone()),
        }
    }
}

/// [`handle_view`] as a template value, built when a template first reads it.
pub(crate) fn handle_value(handle: &ResourceHandle, domain: &OperatorDomain) -> TemplateValue {
    deferred_view(handle, domain, handle_view, None)
}

/// [`provider_view`] as a template value, built when a template first reads it.
pub(crate) fn provider_value(
    provider: &ResourceProvider,
    domain: &OperatorDomain,
) -> TemplateValue {
    deferred_view(provider, domain, provider_view, None)
}

/// `view` of a copy of `object`, made when a template first reads it, which sets `read`.
fn deferred_view<K: Clone + Send + 'static>(
    object: &K,
    domain: &OperatorDomain,
    view: fn(&K, &OperatorDomain) -> Value,
    read: Option<Arc<AtomicBool>>,
) -> TemplateValue {
    let (object, domain) = (object.clone(), domain.clone());
    TemplateValue::deferred(move || {
        if let Some(read) = read {
            read.store(true, Ordering::Relaxed);
        }
        object_of(view(&object, &domain))
    })
}

/// `resource_claim` as templates see it.
pub(crate) fn claim_view(claim: &ResourceClaim, domain: &OperatorDomain) -> Value {
    let mut view = base_view(claim, domain);
    let status = claim.status.clone().unwrap_or_default();
    let handle = status.resource_handle.as_ref();
    let annotations = claim.metadata.annotations.as_ref();
    let extra = json!({
        "approval_state": status.approval.as_ref().map(|a| a.state),
        "parameter_values": status
            .provider
            .as_ref()
            .and_then(|p| p.parameter_values.clone())
            .unwrap_or_default(),
        "resource_handle_name": handle.map(|h| h.name.clone()),
        "resource_handle_namespace": handle.map(|h| h.namespace.clone()),
        "resource_provider_name": claim
            .spec
            .provider
            .as_ref()
            .map(|p| p.name.clone())
            .or_else(|| status.provider.as_ref().map(|p| p.name.clone())),
        "is_detached": handle.and_then(|h| h.detached).unwrap_or(false),
        "resource_pool_name": annotations.and_then(|a| a.get(&domain.resource_pool_name())),
    });
    merge_into(&mut view, extra);
    view
}

/// `resource_handle` as templates see it.
pub(crate) fn handle_view(handle: &ResourceHandle, domain: &OperatorDomain) -> Value {
    let mut view = base_view(handle, domain);
    let spec = &handle.spec;
    let name = handle.metadata.name.clone().unwrap_or_default();
    let extra = json!({
        "guid": crate::core::naming::handle_guid(&name, handle.metadata.generate_name.as_deref()),
        "is_bound": spec.resource_claim.is_some(),
        "is_from_resource_pool": spec.resource_pool.is_some(),
        "parameter_values": spec
            .provider
            .as_ref()
            .and_then(|p| p.parameter_values.clone())
            .unwrap_or_default(),
        "preference_score": spec.preference_score.unwrap_or(0.0),
        "resource_claim_name": spec.resource_claim.as_ref().map(|c| c.name.clone()),
        "resource_claim_namespace": spec.resource_claim.as_ref().map(|c| c.namespace.clone()),
        "resource_pool_name": spec.resource_pool.as_ref().map(|p| p.name.clone()),
        "resource_pool_namespace": spec.resource_pool.as_ref().map(|p| p.namespace.clone()),
        "resource_provider_name": spec.provider.as_ref().map(|p| p.name.clone()),
        "resources": spec.resources.clone().unwrap_or_default(),
        "status_resources": handle
            .status
            .as_ref()
            .and_then(|s| s.resources.clone())
            .unwrap_or_default(),
        "vars": spec.vars.clone().unwrap_or_default(),
    });
    merge_into(&mut view, extra);
    view
}

/// `resource_provider` as templates see it.
pub(crate) fn provider_view(provider: &ResourceProvider, domain: &OperatorDomain) -> Value {
    let mut view = base_view(provider, domain);
    let spec = &provider.spec;
    let extra = json!({
        "match": spec.match_,
        "match_ignore": spec.match_ignore.clone().unwrap_or_default(),
        "override": spec.override_,
        "resource_name": spec
            .resource_name
            .clone()
            .or_else(|| provider.metadata.name.clone()),
        "template_enable": spec.template_enabled(),
        "vars": spec.vars.clone().unwrap_or_default(),
    });
    merge_into(&mut view, extra);
    view
}

/// The attributes every Poolboy object wrapper has (`KopfObject`): the object's own JSON plus
/// `name`, `namespace`, `uid`, `meta`, `annotations`, `labels`, `creation_timestamp`,
/// `deletion_timestamp` and `reference`.
fn base_view<K>(object: &K, domain: &OperatorDomain) -> Value
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let meta = object.meta();
    let mut view = match serde_json::to_value(object) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    view.entry("status").or_insert_with(|| json!({}));
    // The derive knows only the default group; the configured domain is the real one.
    view.insert("apiVersion".to_owned(), json!(domain.api_version()));
    let metadata = view.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let extra = json!({
        "name": meta.name,
        "namespace": meta.namespace,
        "uid": meta.uid,
        "meta": metadata,
        "annotations": meta.annotations.clone().unwrap_or_default(),
        "labels": meta.labels.clone().unwrap_or_default(),
        "creation_timestamp": metadata.get("creationTimestamp"),
        "deletion_timestamp": metadata.get("deletionTimestamp"),
        "reference": {
            "apiVersion": domain.api_version(),
            "kind": K::kind(&()),
            "name": meta.name,
            "namespace": meta.namespace,
        },
    });
    let mut view = Value::Object(view);
    merge_into(&mut view, extra);
    view
}

/// A view as the JSON object it always is.
fn object_of(view: Value) -> Map<String, Value> {
    match view {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Adds `extra`'s keys to `view` without replacing the object's own fields.
fn merge_into(view: &mut Value, extra: Value) {
    if let (Value::Object(view), Value::Object(extra)) = (view, extra) {
        for (key, value) in extra {
            view.entry(key).or_insert(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::claim::ResourceClaimSpec;

    #[test]
    fn a_claim_view_has_poolboy_attributes_and_its_own_fields() {
        let mut claim = ResourceClaim::new("test", ResourceClaimSpec::default());
        claim.metadata.namespace = Some("user-ns".into());
        claim.metadata.annotations = Some([("a".to_owned(), "b".to_owned())].into());
        let view = claim_view(&claim, &OperatorDomain::new("poolboy.dev.local"));
        assert_eq!(view["metadata"]["namespace"], "user-ns");
        assert_eq!(view["namespace"], "user-ns");
        assert_eq!(view["annotations"]["a"], "b");
        assert_eq!(view["kind"], "ResourceClaim");
        assert_eq!(view["reference"]["apiVersion"], "poolboy.dev.local/v1");
        assert_eq!(view["apiVersion"], "poolboy.dev.local/v1");
        assert_eq!(view["status"], json!({}));
        assert_eq!(view["parameter_values"], json!({}));
    }

    use crate::core::test_fixtures::{claim, handle, provider};

    #[test]
    fn a_claim_view_carries_status_and_pool_attributes() {
        let domain = OperatorDomain::default();
        let claim = claim(
            r#"
metadata:
  name: c
  annotations: {poolboy.gpte.redhat.com/resource-pool-name: gold}
  labels: {team: a}
spec: {provider: {name: lab, parameterValues: {size: 9}}}
status:
  approval: {state: approved}
  provider: {name: lab, parameterValues: {size: 4}}
  resourceHandle:
    apiVersion: poolboy.gpte.redhat.com/v1
    kind: ResourceHandle
    name: guid-abcde
    namespace: poolboy
    detached: true
"#,
        );
        let view = claim_view(&claim, &domain);
        assert_eq!(view["name"], "c");
        assert_eq!(view["labels"], json!({"team": "a"}));
        assert_eq!(view["approval_state"], "approved");
        // Validated values, not the requested ones.
        assert_eq!(view["parameter_values"], json!({"size": 4}));
        assert_eq!(view["resource_handle_name"], "guid-abcde");
        assert_eq!(view["resource_handle_namespace"], "poolboy");
        assert_eq!(view["resource_provider_name"], "lab");
        assert_eq!(view["is_detached"], true);
        assert_eq!(view["resource_pool_name"], "gold");
        assert_eq!(view["meta"], view["metadata"]);
        assert_eq!(view["spec"]["provider"]["name"], "lab");
        assert_eq!(view["status"]["provider"]["name"], "lab");
    }

    #[test]
    fn a_handle_view_has_guid_binding_and_vars() {
        let domain = OperatorDomain::new("poolboy.dev.local");
        let handle = handle(
            r#"
metadata: {name: guid-x1y2z, uid: u-1, creationTimestamp: "2026-11-21T12:00:00Z"}
spec:
  provider: {name: lab, parameterValues: {size: 4}}
  preferenceScore: 2.5
  resourceClaim: {apiVersion: poolboy.dev.local/v1, kind: ResourceClaim, name: c, namespace: user1}
  resourcePool: {apiVersion: poolboy.dev.local/v1, kind: ResourcePool, name: p, namespace: poolboy}
  resources:
  - provider: {apiVersion: poolboy.dev.local/v1, kind: ResourceProvider, name: lab, namespace: poolboy}
  vars: {color: blue}
"#,
        );
        let view = handle_view(&handle, &domain);
        assert_eq!(view["guid"], "x1y2z");
        assert_eq!(view["is_bound"], true);
        assert_eq!(view["is_from_resource_pool"], true);
        assert_eq!(view["parameter_values"], json!({"size": 4}));
        assert_eq!(view["preference_score"], 2.5);
        assert_eq!(view["resource_claim_name"], "c");
        assert_eq!(view["resource_claim_namespace"], "user1");
        assert_eq!(view["resource_pool_name"], "p");
        assert_eq!(view["resource_pool_namespace"], "poolboy");
        assert_eq!(view["resource_provider_name"], "lab");
        assert_eq!(view["resources"][0]["provider"]["name"], "lab");
        assert_eq!(view["status_resources"], json!([]));
        assert_eq!(view["vars"], json!({"color": "blue"}));
        assert_eq!(view["uid"], "u-1");
        assert_eq!(view["creation_timestamp"], "2026-11-21T12:00:00Z");
        assert_eq!(view["deletion_timestamp"], Value::Null);
        assert_eq!(view["apiVersion"], "poolboy.dev.local/v1");
        assert_eq!(
            view["reference"],
            json!({
                "apiVersion": "poolboy.dev.local/v1",
                "kind": "ResourceHandle",
                "name": "guid-x1y2z",
                "namespace": "poolboy",
            })
        );
    }

    #[test]
    fn a_provider_view_has_its_settings() {
        let domain = OperatorDomain::default();
        let plain = provider_view(&provider("metadata: {name: p}\nspec: {}"), &domain);
        assert_eq!(plain["resource_name"], "p");
        assert_eq!(plain["template_enable"], false);
        assert_eq!(plain["vars"], json!({}));
        assert_eq!(plain["match_ignore"], json!([]));
        let full = provider_view(
            &provider(
                "metadata: {name: p}\nspec: {resourceName: r, template: {enable: true}, \
                 vars: {a: 1}, match: {kind: K}, matchIgnore: [x], override: {kind: K}}",
            ),
            &domain,
        );
        assert_eq!(full["resource_name"], "r");
        assert_eq!(full["template_enable"], true);
        assert_eq!(full["vars"], json!({"a": 1}));
        assert_eq!(full["match"], json!({"kind": "K"}));
        assert_eq!(full["match_ignore"], json!(["x"]));
        assert_eq!(full["override"], json!({"kind": "K"}));
    }

    #[test]
    fn an_attribute_never_hides_the_objects_own_field() {
        // `spec` and `metadata` are the object's; the added attributes only fill gaps.
        let domain = OperatorDomain::default();
        let view = handle_view(&handle("metadata: {name: guid-a}\nspec: {}"), &domain);
        assert_eq!(view["spec"], json!({}));
        assert_eq!(view["status"], json!({}));
        assert_eq!(view["metadata"]["name"], "guid-a");
    }

    #[test]
    fn subjects_hold_null_for_what_is_absent() {
        let domain = OperatorDomain::default();
        let none = Subjects::new(None, None, &domain);
        assert_eq!(none.claim.to_json(), Value::Null);
        assert_eq!(none.handle.to_json(), Value::Null);
        assert!(none.handle_vars.is_none());
        let handle = handle("metadata: {name: guid-a}\nspec: {vars: {v: 1}}");
        let claim = claim("metadata: {name: c}\nspec: {}");
        let both = Subjects::new(Some(&claim), Some(&handle), &domain);
        assert_eq!(both.claim.to_json()["name"], "c");
        assert_eq!(both.handle.to_json()["guid"], "a");
        assert_eq!(
            both.handle_vars,
            Some(serde_json::Map::from_iter([("v".to_owned(), json!(1))]))
        );
    }
}

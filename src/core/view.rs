//! How claims, handles and providers look to templates.
//!
//! Poolboy hands templates Python wrapper objects, and provider templates in the field reach
//! them through attributes (`resource_claim.metadata.namespace`, `resource_claim.annotations`,
//! `resource_handle.spec.vars`, `resource_provider.name`, …; §5.7). A view is the object's JSON
//! with those attributes added beside `apiVersion`, `kind`, `metadata`, `spec` and `status`.

use kube::Resource;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle, ResourceProvider};

/// The objects a template may refer to at one call site: `resource_claim` and
/// `resource_handle` (null where there is none, like Poolboy's `None`) and the handle's `vars`.
#[derive(Clone, Debug, Default)]
pub struct Subjects {
    pub claim: Value,
    pub handle: Value,
    pub handle_vars: Option<Map<String, Value>>,
}

impl Subjects {
    pub fn new(
        claim: Option<&ResourceClaim>,
        handle: Option<&ResourceHandle>,
        domain: &OperatorDomain,
    ) -> Self {
        Self {
            claim: claim.map_or(Value::Null, |c| claim_view(c, domain)),
            handle: handle.map_or(Value::Null, |h| handle_view(h, domain)),
            handle_vars: handle.and_then(|h| h.spec.vars.clone()),
        }
    }
}

/// `resource_claim` as templates see it.
pub fn claim_view(claim: &ResourceClaim, domain: &OperatorDomain) -> Value {
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
pub fn handle_view(handle: &ResourceHandle, domain: &OperatorDomain) -> Value {
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
pub fn provider_view(provider: &ResourceProvider, domain: &OperatorDomain) -> Value {
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
}

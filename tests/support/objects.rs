//! Poolboy objects as the tests write them: the default domain, references, and the six
//! kinds built from JSON (apiVersion and kind filled in; the namespace comes from the `Api`
//! they are created with).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use poolboy::api::{
    ResourceClaim, ResourceHandle, ResourcePool, ResourcePoolScaling, ResourceProvider,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::from_json;

/// The operator domain the tests run with (`OperatorDomain::default()`).
pub const D: &str = "poolboy.gpte.redhat.com";

/// `<domain>/<name>`: a Poolboy label or annotation key.
pub fn key(name: &str) -> String {
    format!("{D}/{name}")
}

/// `base` with the top-level entries of `extra` added (replacing those of the same name).
pub fn merged(mut base: Value, extra: Value) -> Value {
    if let (Value::Object(base), Value::Object(extra)) = (&mut base, extra) {
        base.extend(extra);
    }
    base
}

/// A reference to Poolboy object `name` of `kind` (`spec.resourceClaim`, `spec.resourcePool`,
/// `status.resourceHandle`, a resource's `provider`).
pub fn reference(kind: &str, name: &str, namespace: &str) -> Value {
    json!({"apiVersion": format!("{D}/v1"), "kind": kind, "name": name, "namespace": namespace})
}

/// A reference to ResourceProvider `name`.
pub fn provider_ref(name: &str, namespace: &str) -> Value {
    reference("ResourceProvider", name, namespace)
}

fn object<K: DeserializeOwned>(kind: &str, metadata: Value, spec: Value) -> K {
    from_json(json!({
        "apiVersion": format!("{D}/v1"), "kind": kind, "metadata": metadata, "spec": spec,
    }))
}

/// ResourceProvider `name` with `spec`.
pub fn provider(name: &str, spec: Value) -> ResourceProvider {
    object("ResourceProvider", json!({"name": name}), spec)
}

/// ResourceClaim `name` with `spec`.
pub fn claim(name: &str, spec: Value) -> ResourceClaim {
    object("ResourceClaim", json!({"name": name}), spec)
}

/// ResourcePool `name` with `spec`.
pub fn pool(name: &str, spec: Value) -> ResourcePool {
    object("ResourcePool", json!({"name": name}), spec)
}

/// ResourcePoolScaling `name` with `spec`.
pub fn scaling(name: &str, spec: Value) -> ResourcePoolScaling {
    object("ResourcePoolScaling", json!({"name": name}), spec)
}

/// A ResourceHandle with `metadata` and `spec`; without a name in `metadata` it gets
/// `generateName: guid-`, as Poolboy names handles.
pub fn handle(metadata: Value, spec: Value) -> ResourceHandle {
    let mut metadata = metadata;
    if metadata.get("name").is_none() {
        metadata["generateName"] = json!("guid-");
    }
    object("ResourceHandle", metadata, spec)
}

/// The name of the resource at `index` of handle `handle` (`guid-x` → `guid<index>-x`): the
/// ConfigMap a handle makes. Panics when `handle` is not named `guid-…`.
pub fn resource_name(handle: &str, index: usize) -> String {
    let guid = handle
        .strip_prefix("guid-")
        .unwrap_or_else(|| panic!("handle {handle}: not a guid- name"));
    format!("guid{index}-{guid}")
}

/// The name of the handle claim `claim` is bound to, per its status.
pub fn handle_name(claim: &ResourceClaim) -> Option<&str> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.resource_handle.as_ref())
        .map(|h| h.name.as_str())
}

/// The claim's initialisation annotation (§6.3).
pub fn initialised_at(claim: &ResourceClaim) -> Option<&String> {
    let annotations = claim.metadata.annotations.as_ref()?;
    annotations.get(&key("resource-claim-init-timestamp"))
}

/// Condition `type_` of `claim`.
pub fn condition<'a>(claim: &'a ResourceClaim, type_: &str) -> Option<&'a Condition> {
    let conditions = claim.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == type_)
}

/// A provider of objects of `api_version`/`kind` in `namespace` (its `override`), with `extra`
/// merged into its spec.
pub fn kind_provider(
    namespace: &str,
    name: &str,
    api_version: &str,
    kind: &str,
    extra: Value,
) -> ResourceProvider {
    let spec = json!({
        "override": {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"namespace": namespace},
        },
    });
    provider(name, merged(spec, extra))
}

/// A provider of ConfigMaps in `namespace`, with `extra` merged into its spec.
pub fn configmap_provider(namespace: &str, name: &str, extra: Value) -> ResourceProvider {
    kind_provider(namespace, name, "v1", "ConfigMap", extra)
}

/// `spec.resources` of a handle: one entry per `(name, provider, template)`, the providers in
/// `namespace`.
pub fn resources(namespace: &str, entries: &[(&str, &str, Value)]) -> Value {
    let entries: Vec<Value> = entries
        .iter()
        .map(|(name, provider, template)| {
            json!({"name": name, "provider": provider_ref(provider, namespace), "template": template})
        })
        .collect();
    json!(entries)
}

//! References between Poolboy objects, shared by several kinds.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A reference to another Poolboy object (`{apiVersion, kind, name, namespace}`, all required),
/// as handles store their claim, pool and providers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

/// A provider reference as a claim may write it: only `name` is required, and only `name` is
/// used; providers are always looked up in the operator namespace (§3.1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The managed resource a handle created: `namespace` is absent for cluster-scoped kinds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// `spec.provider` of claims, handles and pools: one provider and its parameter values.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderParameters {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::free_object")]
    pub parameter_values: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Why a resource has not been created yet (§3.1 `waitingFor`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum WaitingFor {
    #[serde(rename = "ResourceClaim")]
    ResourceClaim,
    #[serde(rename = "Linked ResourceProvider")]
    LinkedResourceProvider,
    #[serde(rename = "Resource Definition")]
    ResourceDefinition,
}

/// A `when` condition (autoDelete, autoDetach).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WhenCondition {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
}

/// The lifespan settings of a provider or a pool (§10.2): `default`, `maximum` and
/// `relativeMaximum` are intervals that may be templates; `unclaimed` rotates idle pool handles.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifespanSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_maximum: Option<String>,
    /// A new pool handle ends this long after creation unless claimed (rotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::simple_interval")]
    pub unclaimed: Option<String>,
}

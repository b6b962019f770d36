//! References between Poolboy objects, shared by several kinds.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

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
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderRef {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub name: String,
    pub namespace: Option<String>,
}

/// The managed resource a handle created: `namespace` is absent for cluster-scoped kinds.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

/// `spec.provider` of claims, handles and pools: one provider and its parameter values.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderParameters {
    pub name: String,
    #[serde(default)]
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
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WhenCondition {
    pub when: Option<String>,
}

/// The lifespan settings of a provider or a pool (§10.2): `default`, `maximum` and
/// `relativeMaximum` are intervals that may be templates; `unclaimed` rotates idle pool handles.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifespanSettings {
    pub default: Option<String>,
    pub maximum: Option<String>,
    pub relative_maximum: Option<String>,
    /// A new pool handle ends this long after creation unless claimed (rotation).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::simple_interval")]
    pub unclaimed: Option<String>,
}

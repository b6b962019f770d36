//! ResourceHandle: the operator-side record of one set of managed resources, bound to at
//! most one claim (§3.2, Δ§2.4). Handles live in the operator namespace.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::refs::{ObjectRef, ProviderParameters, ResourceReference, WaitingFor};

// kube-derive takes one `printcolumn` attribute per column; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "poolboy.gpte.redhat.com",
    version = "v1",
    doc = "One set of managed resources, bound to at most one ResourceClaim.",
    kind = "ResourceHandle",
    namespaced,
    status = "ResourceHandleStatus",
    category = "poolboy",
    shortname = "pbhandle",
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.provider.name"),
    printcolumn(name = "Pool", type_ = "string", json_path = ".spec.resourcePool.name"),
    printcolumn(name = "Healthy", type_ = "boolean", json_path = ".status.healthy"),
    printcolumn(name = "Ready", type_ = "boolean", json_path = ".status.ready"),
    printcolumn(
        name = "Claim Namespace",
        type_ = "string",
        json_path = ".spec.resourceClaim.namespace"
    ),
    printcolumn(
        name = "Claim Name",
        type_ = "string",
        json_path = ".spec.resourceClaim.name"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceHandleSpec {
    pub lifespan: Option<HandleLifespan>,
    /// Higher wins among otherwise equal bind candidates; absent means 0 (Δ§2.4).
    pub preference_score: Option<f64>,
    /// When set, the handle generates its own `resources` from this provider.
    pub provider: Option<ProviderParameters>,
    /// Merged into `metadata.annotations` of every generated resource (Δ§3.2).
    pub resource_annotations: Option<BTreeMap<String, String>>,
    /// Merged into `metadata.labels` of every generated resource (Δ§3.2).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::label_map")]
    pub resource_labels: Option<BTreeMap<String, String>>,
    /// The bound claim; a handle is bound exactly when this is present.
    pub resource_claim: Option<ObjectRef>,
    /// The pool that created the handle; kept after binding.
    pub resource_pool: Option<ObjectRef>,
    pub resources: Option<Vec<HandleResource>>,
    /// Template variables; they override provider vars (Δ§3.4).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub vars: Option<Map<String, Value>>,
}

/// Lifespan values: `default`, `maximum` and `relativeMaximum` are intervals that may be
/// templates; `end` is an RFC 3339 timestamp (§10).
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandleLifespan {
    pub default: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::date_time")]
    pub end: Option<String>,
    pub maximum: Option<String>,
    pub relative_maximum: Option<String>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandleResource {
    pub name: Option<String>,
    pub provider: ObjectRef,
    /// Poolboy ≤ 1.13 copied the status reference here; read only for legacy handles.
    pub reference: Option<ResourceReference>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub template: Option<Value>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ResourceHandleStatus {
    pub healthy: Option<bool>,
    pub ready: Option<bool>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub summary: Option<Value>,
    pub resources: Option<Vec<HandleStatusResource>>,
    pub conditions: Option<Vec<Condition>>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandleStatusResource {
    pub healthy: Option<bool>,
    pub name: Option<String>,
    pub ready: Option<bool>,
    pub reference: Option<ResourceReference>,
    pub waiting_for: Option<WaitingFor>,
}

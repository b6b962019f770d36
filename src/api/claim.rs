//! ResourceClaim: a user's request for resources, in the user's namespace (§3.1, Δ§2.3).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::refs::{ProviderParameters, ProviderRef, ResourceReference, WaitingFor, WhenCondition};

// kube-derive takes one `printcolumn` attribute per column; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "poolboy.gpte.redhat.com",
    version = "v1",
    doc = "A request for resources, satisfied by exactly one ResourceHandle.",
    kind = "ResourceClaim",
    namespaced,
    status = "ResourceClaimStatus",
    category = "poolboy",
    shortname = "pbclaim",
    printcolumn(
        name = "Handle",
        type_ = "string",
        json_path = ".status.resourceHandle.name"
    ),
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.provider.name"),
    printcolumn(name = "Healthy", type_ = "boolean", json_path = ".status.healthy"),
    printcolumn(name = "Ready", type_ = "boolean", json_path = ".status.ready"),
    printcolumn(
        name = "Status",
        type_ = "string",
        description = "Why the claim is or is not ready: the reason of its Ready condition",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = "1",
        json_path = ".status.conditions[?(@.type==\"Ready\")].message"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimSpec {
    /// Jinja2 condition: when true, the claim is deleted (§7.5).
    pub auto_delete: Option<WhenCondition>,
    /// Jinja2 condition: when true, the claim is detached and its handle deleted (§7.5).
    pub auto_detach: Option<WhenCondition>,
    /// Never create a handle for this claim; only bind existing ones (Δ§2.3).
    pub disable_creation: Option<bool>,
    pub lifespan: Option<ClaimLifespan>,
    /// A provider claim: one provider and its parameter values. Excludes `resources`.
    pub provider: Option<ProviderParameters>,
    /// A resources claim: explicit partial resource definitions. Excludes `provider`.
    pub resources: Option<Vec<ClaimResource>>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimLifespan {
    /// Requested end of life, clamped to the maximums (§10.4).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::date_time")]
    pub end: Option<String>,
    /// Nothing happens to the claim before this instant (Δ§3.1.1).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::date_time")]
    pub start: Option<String>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimResource {
    pub name: Option<String>,
    pub provider: Option<ProviderRef>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub template: Option<Value>,
}

/// Kept open (`x-kubernetes-preserve-unknown-fields`) like Poolboy's, so that the kopf
/// bookkeeping of objects moved from Poolboy (`diffBase`, `kopf`) survives.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ResourceClaimStatus {
    pub approval: Option<Approval>,
    pub healthy: Option<bool>,
    pub ready: Option<bool>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub summary: Option<Value>,
    pub lifespan: Option<ClaimStatusLifespan>,
    pub provider: Option<ClaimStatusProvider>,
    pub resource_handle: Option<ClaimHandleRef>,
    pub resources: Option<Vec<ClaimStatusResource>>,
    /// Standard conditions, in addition to Poolboy's own fields.
    pub conditions: Option<Vec<Condition>>,
    /// How long the claim will probably wait (not in Poolboy): while it waits for a handle of
    /// a pool, or for its pool handle to be ready.
    pub wait_estimate: Option<ClaimWaitEstimate>,
}

/// A waiting claim's estimate, from its pool's handles.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimWaitEstimate {
    /// The pool the claim waits on.
    pub pool: String,
    /// The median time a handle of the pool takes from its creation to being ready, rounded
    /// as the `Ready` message says it.
    pub handle_ready_seconds: i64,
    /// The claim's place among the claims waiting for the pool, from 1.
    pub position: Option<i64>,
    /// When the claim's resources are expected to be ready; absent when that waits for a
    /// handle of the pool to be freed.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::date_time")]
    pub expected_ready: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalState {
    Approved,
    Pending,
    Rejected,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    pub state: ApprovalState,
    pub message: Option<String>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimStatusLifespan {
    #[serde(default)]
    #[schemars(schema_with = "super::schema::date_time")]
    pub start: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::date_time")]
    pub end: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::date_time")]
    pub first_ready: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::simple_interval")]
    pub maximum: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::simple_interval")]
    pub relative_maximum: Option<String>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimStatusProvider {
    pub name: String,
    /// The last validated parameter values, defaults included (§8).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub parameter_values: Option<Map<String, Value>>,
    pub validation_errors: Option<Vec<String>>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimHandleRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: String,
    pub detached: Option<bool>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimStatusResource {
    pub name: Option<String>,
    pub provider: Option<ProviderRef>,
    pub reference: Option<ResourceReference>,
    /// The live resource, pruned of Poolboy bookkeeping (Δ§3.1.3).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub state: Option<Value>,
    pub healthy: Option<bool>,
    pub ready: Option<bool>,
    pub validation_error: Option<String>,
    pub waiting_for: Option<WaitingFor>,
}

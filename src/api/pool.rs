//! ResourcePool: keeps a number of unbound handles ready to bind (§3.3, §11, Δ§2.5, Δ§3.3).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::refs::{LifespanSettings, ObjectRef, ProviderParameters};

// kube-derive takes one `printcolumn` attribute per column; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "poolboy.gpte.redhat.com",
    version = "v1",
    doc = "Keeps unbound ResourceHandles ready for claims to bind.",
    kind = "ResourcePool",
    namespaced,
    status = "ResourcePoolStatus",
    category = "poolboy",
    shortname = "pbpool",
    printcolumn(
        name = "ResourceProvider",
        type_ = "string",
        json_path = ".spec.provider.name"
    ),
    printcolumn(name = "Min", type_ = "integer", json_path = ".spec.minAvailable"),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.resourceHandleCount.available"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.resourceHandleCount.ready"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePoolSpec {
    /// Delete unbound handles that are known to be unhealthy.
    pub delete_unhealthy_resource_handles: Option<bool>,
    pub lifespan: Option<LifespanSettings>,
    /// Cap on unbound handles that are not ready yet; unset means no cap.
    #[schemars(range(min = 0))]
    pub max_unready: Option<i64>,
    /// Cap on the pool's handles, bound or not (not in Poolboy 1.17). The pool creates none
    /// beyond it, and a claim that names the pool (`resource-pool-name` annotation) and finds
    /// none of its handles free waits for one instead of getting a handle of its own.
    #[schemars(range(min = 0))]
    pub max_size: Option<i64>,
    /// Cap on the pool's handles being provisioned at once, bound or not: those not ready yet
    /// (not in Poolboy 1.17). Unset means no cap.
    #[schemars(range(min = 0))]
    pub max_concurrent: Option<i64>,
    /// Number of unbound handles to keep.
    #[schemars(range(min = 0))]
    pub min_available: Option<i64>,
    /// Demand-driven sizing (not in Poolboy 1.17): when set, the number of unbound handles to
    /// keep follows the claims bound from the pool and the time a handle takes to get ready,
    /// between `min` and `max`, and replaces `minAvailable`.
    pub autoscale: Option<PoolAutoscale>,
    /// Copied to the handles this pool creates (Δ§2.5).
    pub preference_score: Option<f64>,
    pub provider: Option<ProviderParameters>,
    pub resource_annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::label_map")]
    pub resource_labels: Option<BTreeMap<String, String>>,
    pub resources: Option<Vec<PoolResource>>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub vars: Option<Map<String, Value>>,
}

/// `spec.autoscale`: the unbound handles to keep are `n + 2√n` for the `n` claims expected
/// to bind while one handle is provisioned (the bind rate over `window` times the median time
/// from a handle's creation to its readiness), rounded up, between `min` and `max`.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolAutoscale {
    /// The fewest unbound handles kept; absent means `minAvailable`, or 0.
    #[schemars(range(min = 0))]
    pub min: Option<i64>,
    /// The most unbound handles kept.
    #[schemars(range(min = 0))]
    pub max: i64,
    /// How far back binds are counted, an interval such as `30m` or `2h`; `1h` when absent.
    pub window: Option<String>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolResource {
    pub name: Option<String>,
    pub provider: ObjectRef,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub template: Option<Value>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ResourcePoolStatus {
    pub resource_handle_count: Option<ResourceHandleCount>,
    pub resource_handles: Option<Vec<PoolHandleStatus>>,
    pub conditions: Option<Vec<Condition>>,
    /// What `spec.autoscale` computed (not in Poolboy 1.17).
    pub autoscale: Option<PoolAutoscaleStatus>,
}

/// The number of unbound handles `spec.autoscale` keeps, and why.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolAutoscaleStatus {
    pub target: i64,
    pub reason: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceHandleCount {
    pub available: i64,
    pub ready: i64,
}

/// One unbound handle of the pool; `healthy`/`ready` only when known (Δ B17).
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolHandleStatus {
    pub name: String,
    pub healthy: Option<bool>,
    pub ready: Option<bool>,
}

//! ResourcePoolScaling: add `count` unbound handles to a pool, now or at `at` (Δ§2.1).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

// kube-derive takes one `printcolumn` attribute per column; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "poolboy.gpte.redhat.com",
    version = "v1",
    doc = "Adds a number of unbound handles to a ResourcePool, now or at a given time.",
    kind = "ResourcePoolScaling",
    namespaced,
    status = "ResourcePoolScalingStatus",
    category = "poolboy",
    shortname = "pbscaling",
    printcolumn(name = "Pool", type_ = "string", json_path = ".spec.resourcePool.name"),
    printcolumn(name = "At", type_ = "string", json_path = ".spec.at"),
    printcolumn(name = "Count", type_ = "integer", json_path = ".spec.count"),
    printcolumn(name = "Created", type_ = "integer", json_path = ".status.count"),
    printcolumn(name = "State", type_ = "string", json_path = ".status.state")
)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePoolScalingSpec {
    /// When to start; absent means now.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::date_time")]
    pub at: Option<String>,
    /// Number of handles to add.
    #[schemars(range(min = 0))]
    pub count: i64,
    pub resource_pool: PoolName,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PoolName {
    pub name: String,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ResourcePoolScalingStatus {
    /// Handles created by this scaling, net of unhealthy ones deleted.
    pub count: Option<i64>,
    pub state: Option<ScalingState>,
    /// The scaling's problems (a missing pool, a bad `at`), as `metav1.Condition`s.
    pub conditions: Option<Vec<Condition>>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ScalingState {
    Waiting,
    Scaling,
    Done,
}

//! ResourceWatch: Poolboy 1.17's persisted description of one watch over managed resources
//! (Δ§2.2). Kept so that existing installations keep working; this broker's watches are
//! in-process and shared per kind.
//!
//! The status (`pod.name`) is declared but never written, and, as in Poolboy, the kind has no
//! status subresource: [`super::crd`] drops the one the derive adds.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

// kube-derive takes one `printcolumn` attribute per column; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "poolboy.gpte.redhat.com",
    version = "v1",
    doc = "One watch over managed resources of a kind (kept for Poolboy 1.17 compatibility).",
    kind = "ResourceWatch",
    namespaced,
    status = "ResourceWatchStatus",
    category = "poolboy",
    shortname = "pbwatch",
    selectable = ".spec.apiVersion",
    selectable = ".spec.kind",
    selectable = ".spec.namespace",
    printcolumn(
        name = "Watch Namespace",
        type_ = "string",
        json_path = ".spec.namespace"
    ),
    printcolumn(name = "Api Version", type_ = "string", json_path = ".spec.apiVersion"),
    printcolumn(name = "Kind", type_ = "string", json_path = ".spec.kind")
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceWatchSpec {
    pub api_version: String,
    pub kind: String,
    /// Absent: cluster-wide.
    pub namespace: Option<String>,
    /// Declared by Poolboy, unused there and here.
    #[schemars(regex(pattern = r"^\d+[ms]$"))]
    pub refresh_interval: Option<String>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ResourceWatchStatus {
    pub pod: Option<WatchPod>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct WatchPod {
    pub name: String,
}

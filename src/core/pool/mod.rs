//! A ResourcePool (§11, Δ§3.3) and its ResourcePoolScalings (Δ§2.1).

pub(crate) mod autoscale;
pub(crate) mod plan;
pub(crate) mod refresh;
pub(crate) mod scaling;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::Object;

use crate::api::ResourceHandle;
use crate::api::handle::{ResourceHandleSpec, ResourceHandleStatus};

/// The parts of a handle the pool's rules read, borrowed from either form the broker holds
/// (the store's object, or the typed resource): a pool pass reads every handle of its pool,
/// and copying each into the other form would be most of a warm burst's CPU.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HandleParts<'a> {
    pub metadata: &'a ObjectMeta,
    pub spec: &'a ResourceHandleSpec,
    pub status: Option<&'a ResourceHandleStatus>,
}

impl<'a> From<&'a ResourceHandle> for HandleParts<'a> {
    fn from(handle: &'a ResourceHandle) -> Self {
        Self {
            metadata: &handle.metadata,
            spec: &handle.spec,
            status: handle.status.as_ref(),
        }
    }
}

impl<'a> From<&'a Object<ResourceHandleSpec, ResourceHandleStatus>> for HandleParts<'a> {
    fn from(handle: &'a Object<ResourceHandleSpec, ResourceHandleStatus>) -> Self {
        Self {
            metadata: &handle.metadata,
            spec: &handle.spec,
            status: handle.status.as_ref(),
        }
    }
}

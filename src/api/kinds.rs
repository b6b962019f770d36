//! The broker's kinds as the controllers read and write them.
//!
//! The derived types in `crate::api` carry the default API group at compile time; the
//! configured operator domain is only known at run time. So the controllers talk to the API
//! server with `kube::core::Object<Spec, Status>`, whose group comes from an [`ApiResource`]
//! built from the domain, and hand `core` the plain derived types (same metadata, spec and
//! status) through [`Kinds::claim_of`] and friends.

use kube::core::{ApiResource, GroupVersionKind, Object};

use std::sync::Arc;

use crate::api::claim::{ResourceClaimSpec, ResourceClaimStatus};
use crate::api::handle::{ResourceHandleSpec, ResourceHandleStatus};
use crate::api::pool::{ResourcePoolSpec, ResourcePoolStatus};
use crate::api::provider::{ResourceProviderSpec, ResourceProviderStatus};
use crate::api::scaling::{ResourcePoolScalingSpec, ResourcePoolScalingStatus};
use crate::api::watch::{ResourceWatchSpec, ResourceWatchStatus};
use crate::api::{
    OperatorDomain, ResourceClaim, ResourceHandle, ResourcePool, ResourcePoolScaling,
    ResourceProvider, ResourceWatch, VERSION,
};

pub type ClaimObject = Object<ResourceClaimSpec, ResourceClaimStatus>;
pub type HandleObject = Object<ResourceHandleSpec, ResourceHandleStatus>;
pub type PoolObject = Object<ResourcePoolSpec, ResourcePoolStatus>;
pub type ProviderObject = Object<ResourceProviderSpec, ResourceProviderStatus>;
pub type ScalingObject = Object<ResourcePoolScalingSpec, ResourcePoolScalingStatus>;
pub type WatchObject = Object<ResourceWatchSpec, ResourceWatchStatus>;

/// The dynamic type of a packed object (`store::packed`): its kind's, shared. Every key of a
/// store, and every object a controller has scheduled, holds one (`ObjectRef::dyntype`), and
/// the broker's kinds are `ApiResource`s of five strings each: copied, they take a fifth of a
/// store's memory. Equal by content (an `Arc` compares its pointers first).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct SharedType<D>(Arc<D>);

impl<D> SharedType<D> {
    pub(crate) fn new(dyntype: D) -> Self {
        Self(Arc::new(dyntype))
    }
}

impl<D> std::ops::Deref for SharedType<D> {
    type Target = D;

    fn deref(&self) -> &D {
        &self.0
    }
}

/// The `ApiResource` of each kind in the configured domain.
#[derive(Clone, Debug)]
pub struct Kinds {
    pub claim: ApiResource,
    pub handle: ApiResource,
    pub pool: ApiResource,
    pub provider: ApiResource,
    pub scaling: ApiResource,
    pub watch: ApiResource,
    /// The dynamic types of the packed kinds, for their stores' keys.
    pub(crate) stored_claim: SharedType<ApiResource>,
    pub(crate) stored_handle: SharedType<ApiResource>,
}

impl Kinds {
    pub fn new(domain: &OperatorDomain) -> Self {
        let resource = |kind: &str, plural: &str| {
            let gvk = GroupVersionKind::gvk(domain.group(), VERSION, kind);
            ApiResource::from_gvk_with_plural(&gvk, plural)
        };
        let claim = resource("ResourceClaim", "resourceclaims");
        let handle = resource("ResourceHandle", "resourcehandles");
        Self {
            stored_claim: SharedType::new(claim.clone()),
            stored_handle: SharedType::new(handle.clone()),
            claim,
            handle,
            pool: resource("ResourcePool", "resourcepools"),
            provider: resource("ResourceProvider", "resourceproviders"),
            scaling: resource("ResourcePoolScaling", "resourcepoolscalings"),
            watch: resource("ResourceWatch", "resourcewatches"),
        }
    }

    /// A typed object for the API server, with apiVersion and kind of the configured domain.
    pub fn object<P: Clone, U: Clone>(
        ar: &ApiResource,
        metadata: kube::api::ObjectMeta,
        spec: P,
        status: Option<U>,
    ) -> Object<P, U> {
        let mut object = Object::new("", ar, spec);
        object.metadata = metadata;
        object.status = status;
        object
    }
}

/// The same object as `core` sees it, and back.
macro_rules! conversions {
    ($($object:ty => $derived:ident, $of:ident, $to:ident, $field:ident;)*) => {
        impl Kinds {
            $(
                pub fn $of(object: &$object) -> $derived {
                    $derived {
                        metadata: object.metadata.clone(),
                        spec: object.spec.clone(),
                        status: object.status.clone(),
                    }
                }

                pub fn $to(&self, derived: $derived) -> $object {
                    Self::object(&self.$field, derived.metadata, derived.spec, derived.status)
                }
            )*
        }
    };
}

conversions! {
    ClaimObject => ResourceClaim, claim_of, claim_object, claim;
    HandleObject => ResourceHandle, handle_of, handle_object, handle;
    PoolObject => ResourcePool, pool_of, pool_object, pool;
    ProviderObject => ResourceProvider, provider_of, provider_object, provider;
    ScalingObject => ResourcePoolScaling, scaling_of, scaling_object, scaling;
    WatchObject => ResourceWatch, watch_of, watch_object, watch;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_carry_the_configured_group() {
        let kinds = Kinds::new(&OperatorDomain::new("poolboy.dev.local"));
        assert_eq!(kinds.claim.group, "poolboy.dev.local");
        assert_eq!(kinds.claim.api_version, "poolboy.dev.local/v1");
        assert_eq!(kinds.handle.plural, "resourcehandles");
        let handle = kinds.handle_object(ResourceHandle::new("guid-abcde", Default::default()));
        let json = serde_json::to_value(&handle).expect("serialises");
        assert_eq!(json["apiVersion"], "poolboy.dev.local/v1");
        assert_eq!(json["kind"], "ResourceHandle");
        assert_eq!(json["metadata"]["name"], "guid-abcde");
        assert_eq!(
            Kinds::handle_of(&handle).metadata.name.as_deref(),
            Some("guid-abcde")
        );
    }
}

//! The six custom resources of Poolboy 1.17 (§3, Δ§2), as serde + schemars types.
//!
//! No logic lives here: the types describe the wire format and nothing else. The API group is
//! fixed to the default domain in the derive; [`crd`] rewrites it when another operator domain
//! is configured, and [`domain::OperatorDomain`] derives every label, annotation and finalizer key.
//!
//! An optional field is left out when it is `None` (`#[skip_serializing_none]` on each type), as
//! Poolboy leaves it out. One whose schema is written by hand (`#[schemars(schema_with)]`) also
//! says `#[serde(default)]`: schemars cannot see it is an `Option` and would make it required.

pub mod claim;
pub mod crd;
pub mod domain;
pub mod handle;
pub mod kinds;
pub mod pool;
pub mod provider;
pub mod refs;
pub mod scaling;
mod schema;
pub mod watch;

pub use claim::ResourceClaim;
pub use domain::OperatorDomain;
pub use handle::ResourceHandle;
pub use pool::ResourcePool;
pub use provider::ResourceProvider;
pub use scaling::ResourcePoolScaling;
pub use watch::ResourceWatch;

/// The API group every kind is derived with: Poolboy's default operator domain.
pub const DEFAULT_GROUP: &str = "poolboy.gpte.redhat.com";
/// The only API version Poolboy serves.
pub const VERSION: &str = "v1";

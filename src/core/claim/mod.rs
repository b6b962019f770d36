//! A ResourceClaim (§6, §7, §8): its providers and validated values, the admission check of
//! them, the gates around binding (approval, autoDelete, autoDetach), its status, and what of it
//! reaches its handle.

pub(crate) mod admission;
pub(crate) mod estimate;
pub(crate) mod gates;
pub(crate) mod limits;
pub(crate) mod parameters;
pub(crate) mod providers;
pub(crate) mod resolve;
pub(crate) mod status;
pub(crate) mod to_handle;

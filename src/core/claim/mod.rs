//! A ResourceClaim (§6, §7, §8): its providers and validated values, the gates around binding
//! (approval, autoDelete, autoDetach), its status, and what of it reaches its handle.

pub mod gates;
pub mod parameters;
pub mod plan;
pub mod resolve;
pub mod status;
pub mod to_handle;

//! A ResourceHandle (§12, §13): the handles the broker creates, the resources a handle's
//! provider generates, each resource's definition and plan, and the handle's status.

pub mod definition;
pub mod desired;
pub mod generated;
pub mod new;
pub mod plan;
pub mod status;

//! A ResourceHandle (§12, §13): the handles the broker creates, the resources a handle's
//! provider generates, each resource's definition and plan, and the handle's status.

pub(crate) mod definition;
pub(crate) mod deletion;
pub(crate) mod desired;
pub(crate) mod generated;
pub(crate) mod kstatus;
pub(crate) mod new;
pub(crate) mod plan;
pub(crate) mod status;

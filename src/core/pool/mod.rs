//! A ResourcePool (§11, Δ§3.3) and its ResourcePoolScalings (Δ§2.1).

pub(crate) mod autoscale;
pub(crate) mod plan;
pub(crate) mod refresh;
pub(crate) mod scaling;

//! A ResourcePool (§11, Δ§3.3) and its ResourcePoolScalings (Δ§2.1).

pub mod plan;
pub mod scaling;

//! The broker's decisions, free of I/O: no Kubernetes client, no async runtime, no clock
//! (`now` is always a parameter). The controllers, `poolboy render` and the tests call these
//! same functions: one implementation of each rule.
//!
//! Grouped by what a rule is about: a claim, binding it to a handle, a handle and its
//! resources, a pool, lifespans, providers, templates, Poolboy's JSON diff and merge.

pub(crate) mod binding;
pub(crate) mod claim;
pub(crate) mod conditions;
pub(crate) mod handle;
pub(crate) mod json;
pub(crate) mod lifespan;
pub mod naming;
pub(crate) mod pool;
pub(crate) mod provider;
pub(crate) mod python;
pub(crate) mod template;
#[cfg(test)]
pub(crate) mod test_fixtures;

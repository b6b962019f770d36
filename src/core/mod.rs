//! The broker's decisions, free of I/O: no Kubernetes client, no async runtime, no clock
//! (`now` is always a parameter). The controllers, `poolboy render` and the tests call these
//! same functions: one implementation of each rule.

pub mod bind;
pub mod claim_gates;
pub mod claim_plan;
pub mod claim_resources;
pub mod claim_status;
pub mod claim_to_handle;
pub mod definition;
pub mod desired_resources;
pub mod handle_plan;
pub mod handle_resources;
pub mod handle_status;
pub mod interval;
pub mod lifespan;
pub mod lifespan_values;
pub mod matching;
pub mod merge;
pub mod naming;
pub mod new_handle;
pub mod parameters;
pub mod patch;
pub mod pool_plan;
pub mod provider;
pub mod render;
pub mod render_input;
pub mod scaling_plan;
pub mod schema;
pub mod template;
#[cfg(test)]
pub(crate) mod test_fixtures;
pub mod view;

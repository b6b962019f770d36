//! The broker's decisions, free of I/O: no Kubernetes client, no async runtime, no clock
//! (`now` is always a parameter). The controllers, `poolboy render` and the tests call these
//! same functions: one implementation of each rule.

pub mod interval;
pub mod lifespan;
pub mod matching;
pub mod merge;
pub mod naming;
pub mod patch;
pub mod schema;
pub mod template;

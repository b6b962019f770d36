//! The broker's decisions, free of I/O: no Kubernetes client, no async runtime, no clock
//! (`now` is always a parameter). The controllers, `poolboy render` and the tests call these
//! same functions: one implementation of each rule.
pub mod interval;
pub mod template;

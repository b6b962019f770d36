//! The running operator: wiring of watches, stores and controllers, and the HTTP endpoint.

pub mod http;
pub mod run;

//! The running operator: the screened client, wiring of watches, stores and controllers, the
//! quarantine of objects that cannot be decoded, and the HTTP endpoint.

pub mod client;
pub mod http;
pub mod lease;
pub mod quarantine;
pub mod run;

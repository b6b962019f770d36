//! The running operator: the screened client, wiring of watches, stores and controllers, the
//! quarantine of objects that cannot be decoded, the HTTP endpoint, and the admission
//! webhook's HTTPS endpoint.

pub(crate) mod admission;
pub mod client;
pub(crate) mod fence;
pub(crate) mod http;
pub mod lease;
mod paged_answers;
pub mod quarantine;
pub mod run;
pub mod webhook;

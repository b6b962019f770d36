//! poolboy: a Kubernetes resource pool broker, wire-compatible with Poolboy 1.17.
//!
//! Layout (docs/design.md): `api` holds the CRD types, `core` the pure broker decisions (no
//! client, no clock), `controller` the I/O shell, `runtime` the wiring, and `cli` the
//! command-line entry points.

// `pub` is what the binary, the tests and the benches reach; all else is `pub(crate)` or
// narrower, so the dead-code lint sees every item no caller uses (docs/design.md).
#![warn(unreachable_pub)]

pub mod api;
pub mod cli;
pub mod controller;
pub mod core;
#[cfg(feature = "heap-profile")]
pub mod heap_profile;
pub(crate) mod metrics;
pub(crate) mod render;
pub mod runtime;
pub mod screening;
pub(crate) mod shutdown;
pub(crate) mod store;

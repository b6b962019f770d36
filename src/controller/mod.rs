//! The I/O shell: one controller per kind. Each reconcile observes (stores, a GET only when
//! freshness matters), asks `core` what to do, and acts with guarded writes.

pub(crate) mod admission;
mod backlog;
pub(crate) mod claim;
pub mod context;
pub(crate) mod facts;
pub(crate) mod free_handles;
pub(crate) mod handle;
pub mod health;
pub mod kinds;
pub(crate) mod listed;
pub(crate) mod managed;
pub(crate) mod oversized;
pub(crate) mod packed;
pub(crate) mod pool;
pub(crate) mod providers;
pub(crate) mod reconciler;
mod render_clocks;
pub(crate) mod requester;
pub(crate) mod scaling;
pub(crate) mod write;

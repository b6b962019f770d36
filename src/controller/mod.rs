//! The I/O shell: one controller per kind, each a `reconciler::Lifecycle` the one reconcile
//! shell runs. A pass observes (the `store`, a GET only when freshness matters), asks `core`
//! what to do, and acts through the write layer (`write`), guarded by what it read.

mod backlog;
pub(crate) mod backlogged;
pub(crate) mod claim;
pub mod context;
pub(crate) mod echoes;
pub(crate) mod events;
pub(crate) mod handle;
pub(crate) mod managed;
pub(crate) mod oversized;
pub(crate) mod pool;
pub(crate) mod providers;
pub(crate) mod reconciler;
pub(crate) mod requester;
pub(crate) mod scaling;
pub(crate) mod write;

//! The I/O shell: one controller per kind. Each reconcile observes (stores, a GET only when
//! freshness matters), asks `core` what to do, and acts with guarded writes.

pub mod claim;
pub mod context;
pub mod guarded_delete;
pub mod handle;
pub mod kinds;
pub mod listed;
pub mod managed;
pub mod pool;
pub mod providers;
pub mod requester;
pub mod scaling;

//! The shutdown signal: a future every part of the operator can wait on to learn that it
//! should stop. A leaf, so that controllers can stop on it without importing the runtime that
//! raises it.

use futures::future::{BoxFuture, Shared};

/// Completes once, when the operator should stop; cheap to clone.
pub(crate) type Shutdown = Shared<BoxFuture<'static, ()>>;

//! Binding a claim to a pooled handle (§7.1, Δ§3.2): which handles fit and in what order they
//! are tried, and the one guarded patch that binds (B01).

pub(crate) mod bind;
pub(crate) mod fair_queue;
pub(crate) mod matching;

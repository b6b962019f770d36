//! JSON as Poolboy handles it: its hand-computed diff and `updateFilters` (§12.1, §12.2), its
//! deep merge, the one way to build a JSON pointer, and JSON compacted for the stores.

pub(crate) mod compact;
pub(crate) mod merge;
pub(crate) mod patch;
pub(crate) mod pointer;

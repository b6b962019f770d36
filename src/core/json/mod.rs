//! JSON as Poolboy handles it: its hand-computed diff and `updateFilters` (§12.1, §12.2), its
//! deep merge, and the one way to build a JSON pointer.

pub(crate) mod merge;
pub(crate) mod patch;
pub(crate) mod pointer;

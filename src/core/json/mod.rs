//! JSON as Poolboy handles it: its hand-computed diff and `updateFilters` (§12.1, §12.2) and
//! its deep merge.

pub(crate) mod merge;
pub(crate) mod patch;

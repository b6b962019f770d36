//! `--features heap-profile`: the binary allocates through dhat, which records every
//! allocation; the profile of the heap as it is when the broker is asked to stop (what it
//! keeps while it runs, before shutting down frees it all) is written to
//! `POOLBOY_HEAP_PROFILE` (default `dhat-heap.json`). `hack/heap-top.py` lists its top sites.

use std::sync::{Mutex, PoisonError};

static PROFILER: Mutex<Option<dhat::Profiler>> = Mutex::new(None);

/// Starts recording; the binary's global allocator must be `dhat::Alloc`.
pub fn start() {
    let file = std::env::var_os("POOLBOY_HEAP_PROFILE").unwrap_or_else(|| "dhat-heap.json".into());
    let profiler = dhat::Profiler::builder().file_name(file).build();
    *PROFILER.lock().unwrap_or_else(PoisonError::into_inner) = Some(profiler);
}

/// Writes the profile of the heap as it is now; later calls do nothing.
pub(crate) fn write() {
    let profiler = PROFILER
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    drop(profiler);
}

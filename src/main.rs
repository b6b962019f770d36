use std::process::ExitCode;

#[cfg(not(feature = "heap-profile"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main` (`_RJEM_MALLOC_CONF` in the environment overrides
/// them). One arena: the broker's allocations are small and its threads few, and each arena
/// keeps partly used pages of its own. A background thread purges freed pages on a clock
/// rather than only when jemalloc is next called, which matters to a broker that mostly idles.
/// Together they brought the memory kept after a churn from 16.9 % to 12.0 % above a fresh
/// broker's. A thread cache of blocks up to 4 KiB, not 32: the cache keeps freed blocks for
/// the thread that freed them, and an idle broker's thread never makes the allocations that
/// would trim it; 10.3–11.0 % became 8.4–8.9 % (docs/operations.md, "Where the memory goes").
#[cfg(not(feature = "heap-profile"))]
#[unsafe(export_name = "_rjem_malloc_conf")]
static JEMALLOC_OPTIONS: &[u8; 49] = b"background_thread:true,narenas:1,tcache_max:4096\0";

/// `--features heap-profile`: every allocation is recorded (`poolboy::heap_profile`).
#[cfg(feature = "heap-profile")]
#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

fn main() -> ExitCode {
    #[cfg(feature = "heap-profile")]
    poolboy::heap_profile::start();
    poolboy::cli::main()
}

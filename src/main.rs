use std::process::ExitCode;

#[cfg(not(feature = "heap-profile"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// `--features heap-profile`: every allocation is recorded (`poolboy::heap_profile`).
#[cfg(feature = "heap-profile")]
#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

fn main() -> ExitCode {
    #[cfg(feature = "heap-profile")]
    poolboy::heap_profile::start();
    poolboy::cli::main()
}

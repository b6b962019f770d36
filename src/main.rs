use std::process::ExitCode;

fn main() -> ExitCode {
    poolboy::cli::main()
}

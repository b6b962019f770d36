//! The command line: `poolboy crd | render | run`. Every flag also reads an environment variable.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::api::{OperatorDomain, crd};

#[derive(Parser, Debug)]
#[command(name = "poolboy", version, about = "A Kubernetes resource pool broker")]
struct Cli {
    /// The API group of every kind and the prefix of every label, annotation and finalizer.
    #[arg(long, env = "OPERATOR_DOMAIN", default_value = crate::api::DEFAULT_GROUP, global = true)]
    operator_domain: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the six CustomResourceDefinitions as multi-document YAML.
    Crd,
}

/// Parses the command line, runs the command, and maps its outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let domain = OperatorDomain::new(cli.operator_domain);
    match cli.command {
        Command::Crd => match crd::to_yaml(&crd::all(&domain)) {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("error: cannot serialise the CRDs: {error}");
                ExitCode::FAILURE
            }
        },
    }
}

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
    Crd {
        /// Write one file per kind (`<plural>.yaml`) into this directory instead.
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
}

/// Parses the command line, runs the command, and maps its outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let domain = OperatorDomain::new(cli.operator_domain);
    match cli.command {
        Command::Crd { dir } => report(print_crds(&domain, dir.as_deref())),
    }
}

fn print_crds(domain: &OperatorDomain, dir: Option<&std::path::Path>) -> Result<(), String> {
    let crds = crd::all(domain);
    let Some(dir) = dir else {
        let yaml = crd::to_yaml(&crds).map_err(|e| format!("cannot serialise the CRDs: {e}"))?;
        print!("{yaml}");
        return Ok(());
    };
    for one in &crds {
        let yaml = crd::to_yaml(std::slice::from_ref(one))
            .map_err(|e| format!("cannot serialise the CRDs: {e}"))?;
        let path = dir.join(crd::file_name(one));
        std::fs::write(&path, yaml).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Prints a command's error and turns its outcome into an exit code (1 on error).
fn report(outcome: Result<(), String>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

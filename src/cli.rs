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
    /// Run the operator.
    Run(RunArgs),
    /// Print the ResourceHandle and the resources the broker would create for a claim (or a
    /// pool), without a cluster. Exits 1 when the input is invalid.
    Render(RenderArgs),
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Where providers, pools and handles live. Default: the service account's namespace.
    #[arg(long, env = "OPERATOR_NAMESPACE")]
    operator_namespace: Option<String>,
    /// Watch claims in the operator namespace only, instead of in every namespace.
    #[arg(long, env = "POOLBOY_NAMESPACED")]
    namespaced: bool,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, env = "POOLBOY_METRICS_ADDRESS", default_value = "0.0.0.0:9091")]
    metrics_address: std::net::SocketAddr,
    /// Reconciles of one kind at once.
    #[arg(long, env = "POOLBOY_CONCURRENCY", default_value_t = 8)]
    concurrency: u16,
    /// The `cluster_domain` label of `poolboy_process_time_seconds` (Poolboy's); empty when
    /// unset.
    #[arg(long, env = "CLUSTER_DOMAIN")]
    cluster_domain: Option<String>,
    /// Log as JSON lines (start-up failures included).
    #[arg(long, env = "POOLBOY_LOG_JSON")]
    log_json: bool,
    /// The least severe level logged. `RUST_LOG`, when set, wins: it takes per-module filters
    /// (`poolboy=debug,kube=info`).
    #[arg(long, env = "POOLBOY_LOG_LEVEL", value_enum, default_value_t = LogLevel::Info)]
    log_level: LogLevel,
    /// How often a template whose result depends on the clock in a way no instant can be
    /// derived from (it prints the current time) is rendered again, e.g. `60s` or `5m`.
    /// Comparisons with the current time take effect at their exact instant regardless.
    #[arg(long, env = "POOLBOY_TIME_TEMPLATE_INTERVAL", default_value = "60s", value_parser = positive_interval)]
    time_template_interval: std::time::Duration,
    /// How long before its lifespan ends a claim is warned (a `LifespanEnding` condition and
    /// Event), comma-separated; `none` turns the warnings off.
    #[arg(long, env = "POOLBOY_LIFESPAN_WARNINGS", default_value = "24h,1h", value_parser = lead_times)]
    lifespan_warnings: LeadTimes,
    /// Run the controllers only while holding this Lease of the operator namespace: replicas
    /// take turns, a standby one taking over within 15 s of the holder's end.
    #[arg(long, env = "POOLBOY_LEASE")]
    lease: Option<String>,
    /// Serve the admission webhook of claims (`POST /validate-resourceclaim`) over HTTPS, with
    /// the certificate and key `tls.crt` and `tls.key` of this directory (read again when they
    /// change). No webhook without it.
    #[arg(long, env = "POOLBOY_WEBHOOK_CERT_DIR")]
    webhook_cert_dir: Option<std::path::PathBuf>,
    /// Where the admission webhook listens.
    #[arg(long, env = "POOLBOY_WEBHOOK_ADDRESS", default_value = "0.0.0.0:9443")]
    webhook_address: std::net::SocketAddr,
}

/// The lead times of `--lifespan-warnings`.
#[derive(Clone, Debug)]
struct LeadTimes(Vec<chrono::TimeDelta>);

fn lead_times(text: &str) -> Result<LeadTimes, String> {
    if text.trim().is_empty() || text.trim() == "none" {
        return Ok(LeadTimes(Vec::new()));
    }
    text.split(',')
        .map(|lead| {
            let lead = positive_interval(lead.trim())?;
            chrono::TimeDelta::from_std(lead).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, String>>()
        .map(LeadTimes)
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    fn directive(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

/// A positive interval in Poolboy's notation (`90`, `90s`, `1m30s`, `1.5m`).
fn positive_interval(text: &str) -> Result<std::time::Duration, String> {
    let interval =
        crate::core::lifespan::interval::parse_interval(text).map_err(|e| e.to_string())?;
    interval
        .to_std()
        .ok()
        .filter(|interval| !interval.is_zero())
        .ok_or_else(|| format!("{text:?} is not a positive interval"))
}

/// The namespace file of an in-cluster service account.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

#[derive(clap::Args, Debug)]
struct RenderArgs {
    /// A YAML file of ResourceProviders, a ResourcePool and/or a ResourceClaim (`-` for
    /// standard input). Repeat for several files.
    #[arg(short = 'f', long = "file", required = true)]
    files: Vec<String>,
    /// Render as of this instant (RFC 3339) instead of now.
    #[arg(long)]
    at: Option<String>,
    /// The name the new handle gets (the API server would generate one).
    #[arg(long, default_value = "guid-abcde")]
    handle_name: String,
    /// The namespace of providers, pools and handles.
    #[arg(long, env = "OPERATOR_NAMESPACE", default_value = "poolboy")]
    operator_namespace: String,
}

/// Parses the command line, runs the command, and maps its outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let domain = OperatorDomain::new(cli.operator_domain);
    match cli.command {
        Command::Crd { dir } => report(print_crds(&domain, dir.as_deref())),
        Command::Render(args) => render(args, domain),
        Command::Run(args) => run(args, domain),
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

/// `poolboy render`: exit 0 with the YAML on stdout, 1 for invalid input, 2 for usage errors
/// (an unreadable file, a bad `--at`).
fn render(args: RenderArgs, domain: OperatorDomain) -> ExitCode {
    use crate::render::input::RenderInput;
    use crate::render::{NextChange, RenderOptions, RenderedOutcome, RenderedResource, render};

    let at = args
        .at
        .as_deref()
        .map(|at| crate::core::lifespan::parse_timestamp("--at", at));
    let now = match at {
        None => chrono::Utc::now(),
        Some(Ok(at)) => at,
        Some(Err(e)) => return usage_error(&e.to_string()),
    };
    let mut input = RenderInput::default();
    for file in &args.files {
        let text = if file == "-" {
            let mut text = String::new();
            match std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
                Ok(_) => text,
                Err(e) => return usage_error(&format!("cannot read standard input: {e}")),
            }
        } else {
            match std::fs::read_to_string(file) {
                Ok(text) => text,
                Err(e) => return usage_error(&format!("cannot read {file}: {e}")),
            }
        };
        if let Err(e) = input.add_yaml(file, &text) {
            return invalid(&e.to_string());
        }
    }
    if let Err(e) = input.check_complete() {
        return invalid(&e.to_string());
    }
    let options = RenderOptions {
        domain,
        operator_namespace: args.operator_namespace,
        handle_name: args.handle_name,
        now,
    };
    let rendered = match render(input, &options) {
        Ok(rendered) => rendered,
        Err(e) => return invalid(&e.to_string()),
    };
    let mut out = String::new();
    for note in &rendered.notes {
        out.push_str(&format!("# {note}\n"));
    }
    match yaml_document(&rendered.handle) {
        Ok(yaml) => out.push_str(&yaml),
        Err(e) => return invalid(&e),
    }
    for resource in &rendered.resources {
        let RenderedResource {
            index,
            name,
            outcome,
            next_change,
        } = resource;
        let next_change = match next_change {
            NextChange::Never => String::new(),
            NextChange::At(at) => format!(
                "# resource {index} ({name}) changes with the clock at {}\n",
                at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
            ),
            NextChange::Unpredictable => format!(
                "# resource {index} ({name}) uses the current time: rendered again every --time-template-interval\n"
            ),
        };
        match outcome {
            RenderedOutcome::Definition(definition) => match serde_saphyr::to_string(definition) {
                Ok(yaml) => out.push_str(&format!("---\n{next_change}{yaml}")),
                Err(e) => return invalid(&format!("cannot serialise: {e}")),
            },
            RenderedOutcome::Waiting(why) => {
                out.push_str(&format!(
                    "---\n# resource {index} ({name}) is not created yet: {why}\n{next_change}"
                ));
            }
        }
    }
    print!("{out}");
    ExitCode::SUCCESS
}

fn yaml_document(value: &impl serde::Serialize) -> Result<String, String> {
    serde_saphyr::to_string(value)
        .map(|yaml| format!("---\n{yaml}"))
        .map_err(|e| format!("cannot serialise: {e}"))
}

fn invalid(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

/// `poolboy run`: exit 0 after a clean shutdown (SIGINT or SIGTERM), 1 on failure.
fn run(args: RunArgs, domain: OperatorDomain) -> ExitCode {
    use std::io::IsTerminal;

    use tracing_subscriber::EnvFilter;

    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(args.log_level.directive()));
    // Colours only for a terminal (a file or a Pod's log would keep their escape codes), and
    // not when NO_COLOR says none.
    let colours = std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colours);
    if args.log_json {
        subscriber.json().init();
    } else {
        subscriber.init();
    }
    // From here on, a failure is logged like everything else (a JSON line with --log-json).
    let fail = |code: u8, message: &str| {
        tracing::error!("{message}");
        ExitCode::from(code)
    };
    let operator_namespace = match args.operator_namespace {
        Some(namespace) => namespace,
        None => match std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE) {
            Ok(namespace) => namespace.trim().to_owned(),
            Err(_) => {
                return fail(
                    2,
                    "no operator namespace: pass --operator-namespace or set OPERATOR_NAMESPACE",
                );
            }
        },
    };
    // One thread: the controllers run joined in one future, so a multi-threaded runtime gives
    // them no parallelism, only hands every request and response between its threads (the
    // HTTP connections ran on the workers). Over `make soak` one thread spent 14 % less CPU per
    // claim lifecycle and 1 MiB less memory (docs/operations.md, "Where the CPU goes").
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(1, &format!("cannot start the async runtime: {e}")),
    };
    let outcome = runtime.block_on(async move {
        let config = kube::Config::infer()
            .await
            .map(crate::runtime::client::with_read_timeout)
            .map_err(|e| format!("cannot connect to Kubernetes: {e}"))?;
        let options = crate::runtime::run::RunOptions {
            claim_namespace: args.namespaced.then(|| operator_namespace.clone()),
            config: crate::controller::context::Config {
                domain,
                operator_namespace,
                instance: std::env::var("HOSTNAME").unwrap_or_else(|_| "poolboy".to_owned()),
                time_template_interval: args.time_template_interval,
                lifespan_warnings: args.lifespan_warnings.0,
                managed_watch_idle: crate::controller::context::DEFAULT_MANAGED_WATCH_IDLE,
            },
            metrics_address: Some(args.metrics_address),
            concurrency: args.concurrency.max(1),
            cluster_domain: args.cluster_domain.unwrap_or_default(),
            lease: args.lease,
            webhook: args.webhook_cert_dir.map(|cert_dir| {
                crate::runtime::webhook::WebhookOptions {
                    address: args.webhook_address,
                    cert_dir,
                }
            }),
        };
        crate::runtime::run::run(config, options, shutdown_signal())
            .await
            .map_err(|e| e.to_string())
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => fail(1, &message),
    }
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
    #[cfg(feature = "heap-profile")]
    crate::heap_profile::write();
}

//! Broker replicas as processes of their own (the release `poolboy` binary, as the chart runs
//! it), taking turns through one Lease: the benchmark's replicas scenario kills the holder with
//! SIGKILL, which an in-process operator cannot show.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::metrics::Passes;

/// The Lease the replicas share.
pub const LEASE: &str = "poolboy-bench";

/// Running broker processes, killed when dropped.
pub struct Brokers {
    children: Vec<Replica>,
    /// The CPU seconds of the replicas killed so far, read just before the kill.
    killed_cpu: f64,
    /// The reconciles of the replicas killed so far, read just before the kill.
    killed_passes: Passes,
}

/// One broker process: its Lease identity (without the process id), and where it serves
/// `/metrics`.
struct Replica {
    identity: String,
    child: Child,
    metrics: SocketAddr,
}

impl Replica {
    fn start(identity: String, namespace: &str, kubeconfig: &Path, logs: &Path) -> Self {
        let metrics = crate::support::http::free_address();
        let child = spawn(&identity, namespace, kubeconfig, logs, metrics);
        Self {
            identity,
            child,
            metrics,
        }
    }

    fn cpu_seconds(&self) -> f64 {
        crate::machine::process_cpu_seconds(&self.child.id().to_string())
    }

    /// Its reconciles so far (none when it does not answer).
    async fn passes(&self) -> Passes {
        let (_, metrics) = crate::support::http::get(self.metrics, "/metrics").await;
        Passes::of(&metrics)
    }
}

impl Brokers {
    /// Starts `count` replicas serving `namespace`, each logging to `logs`/<identity>.log.
    pub fn start(count: usize, namespace: &str, kubeconfig: &Path, logs: &Path) -> Self {
        std::fs::create_dir_all(logs).expect("a log directory");
        let children = (0..count)
            .map(|i| Replica::start(format!("bench-replica-{i}"), namespace, kubeconfig, logs))
            .collect();
        Self {
            children,
            killed_cpu: 0.0,
            killed_passes: Passes::default(),
        }
    }

    /// Kills the replica whose Lease identity is `holder` (its `HOSTNAME`, a dash and its
    /// process id) with SIGKILL: no release of the Lease, no graceful stop. Whether one was.
    pub async fn kill(&mut self, holder: &str) -> bool {
        let found = self
            .children
            .iter()
            .position(|replica| holder == format!("{}-{}", replica.identity, replica.child.id()));
        let Some(index) = found else {
            return false;
        };
        let mut replica = self.children.remove(index);
        self.killed(&mut replica).await;
        true
    }

    /// Kills every replica with SIGKILL and starts each again under the same identity (a new
    /// process id, so a new Lease identity): the new ones wait for the old Lease to expire.
    #[allow(dead_code)] // only benches/soak.rs restarts its broker
    pub async fn kill_and_restart(&mut self, namespace: &str, kubeconfig: &Path, logs: &Path) {
        for mut replica in std::mem::take(&mut self.children) {
            self.killed(&mut replica).await;
            let identity = replica.identity;
            self.children
                .push(Replica::start(identity, namespace, kubeconfig, logs));
        }
    }

    /// Kills `replica` with SIGKILL, keeping what it counted.
    async fn killed(&mut self, replica: &mut Replica) {
        self.killed_passes = self.killed_passes.plus(&replica.passes().await);
        self.killed_cpu += replica.cpu_seconds();
        let _ = replica.child.kill();
        let _ = replica.child.wait();
    }

    /// The process ids of the running replicas.
    #[allow(dead_code)] // only benches/soak.rs reads its broker's memory
    pub fn pids(&self) -> Vec<u32> {
        self.children
            .iter()
            .map(|replica| replica.child.id())
            .collect()
    }

    /// Stops every replica with SIGTERM, as Kubernetes stops a Pod, and waits up to `grace` for
    /// them to exit (a broker built with `--features heap-profile` writes its profile then);
    /// whatever still runs is killed.
    #[allow(dead_code)] // only benches/soak.rs stops its broker gracefully
    pub fn stop(mut self, grace: Duration) {
        for replica in &self.children {
            let _ = Command::new("kill")
                .args(["-TERM", &replica.child.id().to_string()])
                .status();
        }
        let deadline = std::time::Instant::now() + grace;
        for replica in &mut self.children {
            while matches!(replica.child.try_wait(), Ok(None))
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        // Drop kills what is left.
        self.children
            .retain_mut(|replica| matches!(replica.child.try_wait(), Ok(None)));
    }

    /// User plus system CPU seconds of the replicas, those killed included.
    pub fn cpu_seconds(&self) -> f64 {
        let running: f64 = self.children.iter().map(Replica::cpu_seconds).sum();
        running + self.killed_cpu
    }

    /// The reconciles of the replicas by kind, those killed included.
    #[allow(dead_code)] // only benches/soak.rs reads its broker's reconciles
    pub async fn passes(&self) -> Passes {
        let mut passes = self.killed_passes.clone();
        for replica in &self.children {
            passes = passes.plus(&replica.passes().await);
        }
        passes
    }
}

impl Drop for Brokers {
    fn drop(&mut self) {
        for replica in &mut self.children {
            let _ = replica.child.kill();
            let _ = replica.child.wait();
        }
    }
}

/// The brokers' `RUST_LOG`: `POOLBOY_BENCH_BROKER_LOG` (`poolboy=debug,kube_runtime=info` names
/// each reconcile and why kube-runtime ran it), warnings otherwise.
fn log_filter() -> String {
    std::env::var("POOLBOY_BENCH_BROKER_LOG").unwrap_or_else(|_| "poolboy=warn".to_owned())
}

/// One broker process `identity`, serving `/metrics` on `metrics` and logging to
/// `logs`/<identity>.log (appended to, so that a restarted replica's log follows its
/// predecessor's).
fn spawn(
    identity: &str,
    namespace: &str,
    kubeconfig: &Path,
    logs: &Path,
    metrics: SocketAddr,
) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join(format!("{identity}.log")))
        .expect("a log file");
    let err = log.try_clone().expect("the log file again");
    Command::new(env!("CARGO_BIN_EXE_poolboy"))
        .args(["run", "--namespaced", "--operator-namespace", namespace])
        .args(["--metrics-address", &metrics.to_string(), "--lease", LEASE])
        .env("KUBECONFIG", kubeconfig)
        .env("HOSTNAME", identity)
        .env("RUST_LOG", log_filter())
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .expect("starting the broker binary")
}

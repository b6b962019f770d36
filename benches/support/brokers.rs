//! Broker replicas as processes of their own (the release `poolboy` binary, as the chart runs
//! it), taking turns through one Lease: the benchmark's replicas scenario kills the holder with
//! SIGKILL, which an in-process operator cannot show.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

/// The Lease the replicas share.
pub const LEASE: &str = "poolboy-bench";

/// Running broker processes, killed when dropped.
pub struct Brokers {
    children: Vec<(String, Child)>,
    /// The CPU seconds of the replicas killed so far, read just before the kill.
    killed_cpu: f64,
}

impl Brokers {
    /// Starts `count` replicas serving `namespace`, each logging to `logs`/<identity>.log.
    pub fn start(count: usize, namespace: &str, kubeconfig: &Path, logs: &Path) -> Self {
        std::fs::create_dir_all(logs).expect("a log directory");
        let children = (0..count)
            .map(|i| {
                let identity = format!("bench-replica-{i}");
                let child = spawn(&identity, namespace, kubeconfig, logs);
                (identity, child)
            })
            .collect();
        Self {
            children,
            killed_cpu: 0.0,
        }
    }

    /// Who holds the Lease now, if anyone, and until when it holds without another renewal
    /// (its renew time plus its duration).
    pub async fn holder(
        client: &kube::Client,
        namespace: &str,
    ) -> Option<(String, std::time::SystemTime)> {
        let lease = Api::<Lease>::namespaced(client.clone(), namespace)
            .get_opt(LEASE)
            .await
            .ok()??;
        let spec = lease.spec?;
        let renewed = std::time::SystemTime::from(spec.renew_time.or(spec.acquire_time)?.0);
        let duration = Duration::from_secs(u64::try_from(spec.lease_duration_seconds?).ok()?);
        Some((spec.holder_identity?, renewed + duration))
    }

    /// Kills the replica whose Lease identity is `holder` (its `HOSTNAME`, a dash and its
    /// process id) with SIGKILL: no release of the Lease, no graceful stop. Whether one was.
    pub fn kill(&mut self, holder: &str) -> bool {
        let found = self
            .children
            .iter_mut()
            .find(|(identity, child)| holder == format!("{identity}-{}", child.id()));
        let Some((_, child)) = found else {
            return false;
        };
        self.killed_cpu += crate::machine::process_cpu_seconds(&child.id().to_string());
        let _ = child.kill();
        let _ = child.wait();
        true
    }

    /// Kills every replica with SIGKILL and starts each again under the same identity (a new
    /// process id, so a new Lease identity): the new ones wait for the old Lease to expire.
    #[allow(dead_code)] // only benches/soak.rs restarts its broker
    pub fn kill_and_restart(&mut self, namespace: &str, kubeconfig: &Path, logs: &Path) {
        for (identity, child) in &mut self.children {
            self.killed_cpu += crate::machine::process_cpu_seconds(&child.id().to_string());
            let _ = child.kill();
            let _ = child.wait();
            *child = spawn(identity, namespace, kubeconfig, logs);
        }
    }

    /// The process ids of the running replicas.
    #[allow(dead_code)] // only benches/soak.rs reads its broker's memory
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|(_, child)| child.id()).collect()
    }

    /// Stops every replica with SIGTERM, as Kubernetes stops a Pod, and waits up to `grace` for
    /// them to exit (a broker built with `--features heap-profile` writes its profile then);
    /// whatever still runs is killed.
    #[allow(dead_code)] // only benches/soak.rs stops its broker gracefully
    pub fn stop(mut self, grace: Duration) {
        for (_, child) in &self.children {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        let deadline = std::time::Instant::now() + grace;
        for (_, child) in &mut self.children {
            while matches!(child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        // Drop kills what is left.
        self.children
            .retain_mut(|(_, child)| matches!(child.try_wait(), Ok(None)));
    }

    /// User plus system CPU seconds of the replicas, those killed included.
    pub fn cpu_seconds(&self) -> f64 {
        let running: f64 = self
            .children
            .iter()
            .map(|(_, child)| crate::machine::process_cpu_seconds(&child.id().to_string()))
            .sum();
        running + self.killed_cpu
    }
}

impl Drop for Brokers {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One broker process `identity`, logging to `logs`/<identity>.log (appended to, so that a
/// restarted replica's log follows its predecessor's).
fn spawn(identity: &str, namespace: &str, kubeconfig: &Path, logs: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join(format!("{identity}.log")))
        .expect("a log file");
    let err = log.try_clone().expect("the log file again");
    Command::new(env!("CARGO_BIN_EXE_poolboy"))
        .args(["run", "--namespaced", "--operator-namespace", namespace])
        .args(["--metrics-address", "127.0.0.1:0", "--lease", LEASE])
        .env("KUBECONFIG", kubeconfig)
        .env("HOSTNAME", identity)
        .env("RUST_LOG", "poolboy=warn")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .expect("starting the broker binary")
}

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
                let log = std::fs::File::create(logs.join(format!("{identity}.log")))
                    .expect("a log file");
                let err = log.try_clone().expect("the log file again");
                let child = Command::new(env!("CARGO_BIN_EXE_poolboy"))
                    .args(["run", "--namespaced", "--operator-namespace", namespace])
                    .args(["--metrics-address", "127.0.0.1:0", "--lease", LEASE])
                    .env("KUBECONFIG", kubeconfig)
                    .env("HOSTNAME", &identity)
                    .env("RUST_LOG", "poolboy=warn")
                    .stdin(Stdio::null())
                    .stdout(log)
                    .stderr(err)
                    .spawn()
                    .expect("starting the broker binary");
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

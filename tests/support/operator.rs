//! The whole operator, in-process, confined to one test's namespace: that namespace is both
//! the operator namespace and the only namespace whose claims it watches, so tests running in
//! parallel never see each other's objects. It runs as `poolboy run` runs it: on a thread and a
//! single-threaded tokio runtime of its own, beside the test's.

use std::net::SocketAddr;

use poolboy::api::OperatorDomain;
use poolboy::controller::context::{
    Config, DEFAULT_MANAGED_WATCH_IDLE, DEFAULT_TIME_TEMPLATE_INTERVAL,
};
use poolboy::runtime::run::{RunOptions, run};
use poolboy::runtime::webhook::WebhookOptions;
use tokio::sync::oneshot;

/// A running operator; stopped (gracefully) by [`TestOperator::stop`] or when dropped.
pub struct TestOperator {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestOperator {
    /// Starts an operator for `namespace`. It connects with `kube_config` (usually
    /// [`super::TestEnv::kube_config`]) through the broker's own screened client, as
    /// `poolboy run` does.
    pub fn start(kube_config: kube::Config, namespace: &str) -> Self {
        Self::start_with(kube_config, namespace, None, "operator")
    }

    /// Starts an operator named `instance` (two may run at once, without leader election),
    /// with metrics served on `metrics_address` if given.
    pub fn start_with(
        kube_config: kube::Config,
        namespace: &str,
        metrics_address: Option<SocketAddr>,
        instance: &str,
    ) -> Self {
        Self::start_configured(kube_config, namespace, metrics_address, instance, |_| {})
    }

    /// Starts an operator for `namespace` whose configuration `configure` adjusts (for example
    /// a short `time_template_interval`).
    pub fn start_configured(
        kube_config: kube::Config,
        namespace: &str,
        metrics_address: Option<SocketAddr>,
        instance: &str,
        configure: impl FnOnce(&mut Config),
    ) -> Self {
        Self::start_full(
            kube_config,
            namespace,
            metrics_address,
            instance,
            None,
            None,
            configure,
        )
    }

    /// Starts an operator named `instance` that runs its controllers only while it holds Lease
    /// `lease` of `namespace` (`poolboy run --lease`), with metrics and probes served on
    /// `metrics_address` if given, as the chart's replicas do.
    pub fn start_leased(
        kube_config: kube::Config,
        namespace: &str,
        instance: &str,
        lease: &str,
        metrics_address: Option<SocketAddr>,
    ) -> Self {
        Self::start_full(
            kube_config,
            namespace,
            metrics_address,
            instance,
            Some(lease.to_owned()),
            None,
            |_| {},
        )
    }

    /// Starts an operator named `instance` that serves the admission webhook as `webhook`
    /// says (`poolboy run --webhook-cert-dir`), its metrics on `metrics_address`, and, with
    /// `lease`, runs its controllers only while holding that Lease.
    pub fn start_with_webhook(
        kube_config: kube::Config,
        namespace: &str,
        metrics_address: SocketAddr,
        instance: &str,
        lease: Option<&str>,
        webhook: WebhookOptions,
    ) -> Self {
        Self::start_full(
            kube_config,
            namespace,
            Some(metrics_address),
            instance,
            lease.map(str::to_owned),
            Some(webhook),
            |_| {},
        )
    }

    fn start_full(
        kube_config: kube::Config,
        namespace: &str,
        metrics_address: Option<SocketAddr>,
        instance: &str,
        lease: Option<String>,
        webhook: Option<WebhookOptions>,
        configure: impl FnOnce(&mut Config),
    ) -> Self {
        // `RUST_LOG=poolboy=debug cargo test … -- --nocapture` shows what the operator does.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let mut config = Config {
            domain: OperatorDomain::default(),
            operator_namespace: namespace.to_owned(),
            instance: instance.to_owned(),
            time_template_interval: DEFAULT_TIME_TEMPLATE_INTERVAL,
            lifespan_warnings: vec![chrono::TimeDelta::hours(24), chrono::TimeDelta::hours(1)],
            managed_watch_idle: DEFAULT_MANAGED_WATCH_IDLE,
        };
        configure(&mut config);
        let options = RunOptions {
            config,
            claim_namespace: Some(namespace.to_owned()),
            metrics_address,
            concurrency: 8,
            cluster_domain: "test".to_owned(),
            lease,
            webhook,
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("operator-{instance}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the operator's runtime");
                runtime.block_on(async move {
                    let shutdown = async move {
                        let _ = stopped.await;
                    };
                    if let Err(error) = run(kube_config, options, shutdown).await {
                        panic!("operator failed: {error}");
                    }
                });
            })
            .expect("the operator's thread");
        Self {
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Stops the operator and waits until its in-flight reconciles have finished.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            match tokio::task::spawn_blocking(move || thread.join()).await {
                Ok(Err(panic)) => std::panic::resume_unwind(panic),
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                _ => {}
            }
        }
    }
}

impl Drop for TestOperator {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

//! Prometheus metrics. `poolboy_process_time_seconds` keeps Poolboy 1.17's name and labels
//! (Δ§6) so that existing dashboards keep working; the others are new.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Poolboy's labels: `app` is the kind (ResourceClaim, ResourceHandle, …, K8s, Template),
/// `method` the step, `status` success or error (Δ§6).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProcessLabels {
    pub app: String,
    pub method: String,
    pub status: String,
    pub cluster_domain: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    pub name: String,
    pub namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

pub struct Metrics {
    registry: Registry,
    cluster_domain: String,
    pub process_time: Family<ProcessLabels, Histogram>,
    /// Objects whose spec is invalid (reported in their status), by kind.
    pub invalid_resources: Family<KindLabels, Counter>,
    /// Bind attempts that lost a race (the handle was taken by another binder).
    pub bind_conflicts: Counter,
    /// Status writes that conflicted and were recomputed.
    pub status_conflicts: Family<KindLabels, Counter>,
    pub pool_available: Family<PoolLabels, Gauge>,
    pub pool_ready: Family<PoolLabels, Gauge>,
    /// Watches of managed resource kinds running now.
    pub managed_watches: Gauge,
    /// Objects set aside now because they cannot be decoded, by kind (issue 10).
    pub quarantined_objects: Family<KindLabels, Gauge>,
    /// Objects set aside, counted once per version reported (a Warning Event each), by kind.
    pub quarantined: Family<KindLabels, Counter>,
}

impl Metrics {
    pub fn new(cluster_domain: &str) -> Self {
        let mut registry = Registry::default();
        let process_time = Family::<ProcessLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ])
        });
        registry.register(
            "poolboy_process_time_seconds",
            "Wall time of each reconcile step",
            process_time.clone(),
        );
        let invalid_resources = Family::<KindLabels, Counter>::default();
        registry.register(
            "poolboy_invalid_resource_count",
            "Objects found invalid, reported in their status",
            invalid_resources.clone(),
        );
        let bind_conflicts = Counter::default();
        registry.register(
            "poolboy_bind_conflicts",
            "Bind attempts that found the handle already taken",
            bind_conflicts.clone(),
        );
        let status_conflicts = Family::<KindLabels, Counter>::default();
        registry.register(
            "poolboy_status_conflicts",
            "Status writes that conflicted and were recomputed",
            status_conflicts.clone(),
        );
        let pool_available = Family::<PoolLabels, Gauge>::default();
        registry.register(
            "poolboy_resource_pool_available",
            "Unbound handles of a pool",
            pool_available.clone(),
        );
        let pool_ready = Family::<PoolLabels, Gauge>::default();
        registry.register(
            "poolboy_resource_pool_ready",
            "Unbound ready handles of a pool",
            pool_ready.clone(),
        );
        let managed_watches = Gauge::default();
        registry.register(
            "poolboy_managed_watches",
            "Watches of managed resource kinds running now",
            managed_watches.clone(),
        );
        let quarantined_objects = Family::<KindLabels, Gauge>::default();
        registry.register(
            "poolboy_quarantined_objects",
            "Objects set aside because they cannot be decoded",
            quarantined_objects.clone(),
        );
        let quarantined = Family::<KindLabels, Counter>::default();
        registry.register(
            "poolboy_quarantined",
            "Objects reported as set aside because they cannot be decoded",
            quarantined.clone(),
        );
        Self {
            registry,
            cluster_domain: cluster_domain.to_owned(),
            process_time,
            invalid_resources,
            bind_conflicts,
            status_conflicts,
            pool_available,
            pool_ready,
            managed_watches,
            quarantined_objects,
            quarantined,
        }
    }

    /// Records one timed step.
    pub fn observe(&self, app: &str, method: &str, success: bool, seconds: f64) {
        self.process_time
            .get_or_create(&ProcessLabels {
                app: app.to_owned(),
                method: method.to_owned(),
                status: if success { "success" } else { "error" }.to_owned(),
                cluster_domain: self.cluster_domain.clone(),
            })
            .observe(seconds);
    }

    /// A status (or other guarded) write of `kind` that conflicted and was recomputed.
    pub fn conflict(&self, kind: &str) {
        self.status_conflicts
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// An object of `kind` newly found invalid (reported in its status).
    pub fn invalid(&self, kind: &str) {
        self.invalid_resources
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// How many objects of `kind` are set aside now.
    pub fn set_quarantined(&self, kind: &str, count: usize) {
        self.quarantined_objects
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// An object version of `kind` newly set aside (and reported).
    pub fn quarantine(&self, kind: &str) {
        self.quarantined
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_histogram_keeps_poolboy_names_and_labels() {
        let metrics = Metrics::new("example.com");
        metrics.observe("ResourceClaim", "reconcile", true, 0.02);
        let text = metrics.encode().expect("encodes");
        assert!(text.contains("poolboy_process_time_seconds_bucket{"));
        assert!(text.contains("app=\"ResourceClaim\""));
        assert!(text.contains("method=\"reconcile\""));
        assert!(text.contains("status=\"success\""));
        assert!(text.contains("cluster_domain=\"example.com\""));
    }
}

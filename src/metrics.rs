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
pub(crate) struct ProcessLabels {
    pub app: String,
    pub method: String,
    pub status: String,
    pub cluster_domain: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PoolLabels {
    pub name: String,
    pub namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabels {
    pub kind: String,
}

/// One controller's reconciles: `controller` is the kind it reconciles.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ControllerLabels {
    pub controller: String,
}

/// A reconcile's outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReconcileLabels {
    pub controller: String,
    /// `success` or `error`.
    pub result: String,
}

/// Why a handle was created (`pool`, `claim`) or deleted (`unhealthy`, `pool_deleted`,
/// `lifespan_ended`, `claim_deleted`, `released`, `detached`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabels {
    pub reason: String,
}

/// Where a claim's handle came from: `warm` (a pool's), `cold` (made for it or by hand).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SourceLabels {
    pub source: String,
}

/// An admission review: `operation` `CREATE` or `UPDATE`, `result` `allowed`,
/// `warned` (allowed with warnings), `denied`, or `unchecked` (allowed without a check: the
/// providers were not listed yet, the claim could not be read, or its handle could not be).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct AdmissionLabels {
    pub operation: String,
    pub result: String,
}

/// A request the broker made to the API server: `verb` as the API server names it (`get`,
/// `list`, `watch`, `create`, `update`, `patch`, `delete`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct VerbLabels {
    pub verb: String,
}

/// Claims by `state`: `bound`, `waiting` (valid, no handle yet), `invalid`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StateLabels {
    pub state: String,
}

/// How many claims the broker's claim watch shows in each state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ClaimCounts {
    pub bound: i64,
    pub waiting: i64,
    pub invalid: i64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct BuildLabels {
    pub version: String,
}

/// A pool's handles as one reconcile counted them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PoolCounts {
    pub min_available: i64,
    /// Unbound handles (and reserved names): what claims can bind.
    pub available: i64,
    pub ready: i64,
    /// Bound handles of the pool.
    pub taken: i64,
}

/// The broker's kinds, as the per-kind metrics label them.
const KINDS: [&str; 6] = [
    "ResourceClaim",
    "ResourceHandle",
    "ResourcePool",
    "ResourcePoolScaling",
    "ResourceProvider",
    "ResourceWatch",
];

/// The controllers, by the kind each reconciles.
const CONTROLLERS: [&str; 4] = [
    "ResourceClaim",
    "ResourceHandle",
    "ResourcePool",
    "ResourcePoolScaling",
];

/// Why handles are created, and deleted (a pool's removals: `unhealthy`, `stale`, `surplus`).
const HANDLES_CREATED: [&str; 2] = ["pool", "claim"];
const HANDLES_DELETED: [&str; 8] = [
    "unhealthy",
    "stale",
    "surplus",
    "pool_deleted",
    "lifespan_ended",
    "claim_deleted",
    "released",
    "detached",
];

/// Creates the series of `family` with `labels`, at zero.
fn touch<S, M, C>(family: &Family<S, M, C>, labels: &S)
where
    S: Clone + std::hash::Hash + Eq,
    C: prometheus_client::metrics::family::MetricConstructor<M>,
{
    drop(family.get_or_create(labels));
}

pub(crate) struct Metrics {
    registry: Registry,
    cluster_domain: String,
    pub process_time: Family<ProcessLabels, Histogram>,
    /// Objects whose spec is invalid (reported in their status), by kind.
    pub invalid_resources: Family<KindLabels, Counter>,
    /// Bind attempts that lost a race (the handle was taken by another binder).
    pub bind_conflicts: Counter,
    /// Passes whose guarded write found the object changed (recomputed from a fresh read).
    pub status_conflicts: Family<KindLabels, Counter>,
    pub pool_available: Family<PoolLabels, Gauge>,
    pub pool_ready: Family<PoolLabels, Gauge>,
    /// Watches of managed resource kinds running now.
    pub managed_watches: Gauge,
    /// Objects set aside now because they cannot be decoded, by kind.
    pub quarantined_objects: Family<KindLabels, Gauge>,
    /// Objects set aside, counted once per version reported (a Warning Event each), by kind.
    pub quarantined: Family<KindLabels, Counter>,
    reconciles: Family<ReconcileLabels, Histogram>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    reconciles_in_flight: Family<ControllerLabels, Gauge>,
    pool_min_available: Family<PoolLabels, Gauge>,
    pool_unready: Family<PoolLabels, Gauge>,
    pool_taken: Family<PoolLabels, Gauge>,
    handles_created: Family<ReasonLabels, Counter>,
    handles_deleted: Family<ReasonLabels, Counter>,
    claim_bound: Family<SourceLabels, Histogram>,
    claim_ready: Family<SourceLabels, Histogram>,
    admission_reviews: Family<AdmissionLabels, Counter>,
    api_requests: Family<VerbLabels, Counter>,
    leader: Gauge,
    claims: Family<StateLabels, Gauge>,
    /// Counts the claims at each scrape, once the claim watch runs.
    claim_counter: std::sync::OnceLock<Box<dyn Fn() -> ClaimCounts + Send + Sync>>,
    events_waiting: Gauge,
    /// Counts the Events not yet published at each scrape, once the controllers are built.
    event_counter: std::sync::OnceLock<Box<dyn Fn() -> usize + Send + Sync>>,
    process: ProcessGauges,
}

/// The process's own figures, sampled from `/proc` at each scrape (Prometheus' standard
/// `process_*` names).
#[derive(Clone, Default)]
struct ProcessGauges {
    cpu_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
    resident_memory_bytes: Gauge,
    open_fds: Gauge,
    start_time_seconds: Gauge,
}

impl Metrics {
    pub(crate) fn new(cluster_domain: &str) -> Self {
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
            "Passes whose guarded write found the object changed, recomputed from a fresh read",
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
        let reconciles = Family::<ReconcileLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ])
        });
        registry.register(
            "poolboy_reconcile_duration_seconds",
            "Wall time of one reconcile, by controller and result (its count: the reconciles)",
            reconciles.clone(),
        );
        let reconcile_errors = Family::<ControllerLabels, Counter>::default();
        registry.register(
            "poolboy_reconcile_errors",
            "Reconciles that failed and were requeued with backoff",
            reconcile_errors.clone(),
        );
        let reconciles_in_flight = Family::<ControllerLabels, Gauge>::default();
        registry.register(
            "poolboy_reconciles_in_flight",
            "Reconciles running now",
            reconciles_in_flight.clone(),
        );
        let pool_min_available = Family::<PoolLabels, Gauge>::default();
        registry.register(
            "poolboy_resource_pool_min_available",
            "The unbound handles a pool asks for (spec.minAvailable)",
            pool_min_available.clone(),
        );
        let pool_unready = Family::<PoolLabels, Gauge>::default();
        registry.register(
            "poolboy_resource_pool_unready",
            "Unbound handles of a pool that are not ready",
            pool_unready.clone(),
        );
        let pool_taken = Family::<PoolLabels, Gauge>::default();
        registry.register(
            "poolboy_resource_pool_taken",
            "Handles of a pool bound to a claim",
            pool_taken.clone(),
        );
        let handles_created = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "poolboy_resource_handles_created",
            "Handles created, by reason (pool, claim)",
            handles_created.clone(),
        );
        let handles_deleted = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "poolboy_resource_handles_deleted",
            "Handles deleted by the broker, by reason",
            handles_deleted.clone(),
        );
        let latency = || {
            Histogram::new([
                0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
                3600.0,
            ])
        };
        let claim_bound = Family::<SourceLabels, Histogram>::new_with_constructor(latency);
        registry.register(
            "poolboy_claim_bind_seconds",
            "From a claim's creation to its bind, warm (a pool's handle) or cold",
            claim_bound.clone(),
        );
        let claim_ready = Family::<SourceLabels, Histogram>::new_with_constructor(latency);
        registry.register(
            "poolboy_claim_ready_seconds",
            "From a claim's creation to its resources being ready, warm or cold",
            claim_ready.clone(),
        );
        let admission_reviews = Family::<AdmissionLabels, Counter>::default();
        registry.register(
            "poolboy_admission_reviews",
            "Admission reviews of claims answered, by operation and result",
            admission_reviews.clone(),
        );
        let api_requests = Family::<VerbLabels, Counter>::default();
        registry.register(
            "poolboy_api_requests",
            "Requests the broker made to the API server, by verb",
            api_requests.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "poolboy_leader",
            "1 while this process runs the controllers (it holds the Lease, or runs without one)",
            leader.clone(),
        );
        let claims = Family::<StateLabels, Gauge>::default();
        registry.register(
            "poolboy_claims",
            "Claims the broker watches, by state: bound, waiting, invalid",
            claims.clone(),
        );
        let events_waiting = Gauge::default();
        registry.register(
            "poolboy_events_waiting",
            "Events raised and not yet published (while claims or handles wait for a worker, \
             Events wait too, at most 30 s)",
            events_waiting.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            })
            .set(1);
        registry.register("poolboy_build_info", "The broker's version", build_info);
        let process = ProcessGauges::default();
        registry.register(
            "process_cpu_seconds",
            "User and system CPU time spent",
            process.cpu_seconds.clone(),
        );
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory size",
            process.resident_memory_bytes.clone(),
        );
        registry.register(
            "process_open_fds",
            "Open file descriptors",
            process.open_fds.clone(),
        );
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch",
            process.start_time_seconds.clone(),
        );
        let metrics = Self {
            registry,
            cluster_domain: cluster_domain.to_owned(),
            reconciles,
            reconcile_errors,
            reconciles_in_flight,
            pool_min_available,
            pool_unready,
            pool_taken,
            handles_created,
            handles_deleted,
            claim_bound,
            claim_ready,
            admission_reviews,
            api_requests,
            leader,
            claims,
            claim_counter: std::sync::OnceLock::new(),
            events_waiting,
            event_counter: std::sync::OnceLock::new(),
            process,
            process_time,
            invalid_resources,
            bind_conflicts,
            status_conflicts,
            pool_available,
            pool_ready,
            managed_watches,
            quarantined_objects,
            quarantined,
        };
        metrics.start_at_zero();
        metrics
    }

    /// Creates, at zero, every series whose labels are known in advance, so that a scrape
    /// shows each family from the start and a rate or an alert sees the first increase.
    fn start_at_zero(&self) {
        let labels = |value: &str| value.to_owned();
        for kind in KINDS {
            let kind = KindLabels { kind: labels(kind) };
            touch(&self.invalid_resources, &kind);
            touch(&self.quarantined, &kind);
            touch(&self.quarantined_objects, &kind);
        }
        for controller in CONTROLLERS {
            touch(
                &self.status_conflicts,
                &KindLabels {
                    kind: labels(controller),
                },
            );
            let by = ControllerLabels {
                controller: labels(controller),
            };
            touch(&self.reconcile_errors, &by);
            touch(&self.reconciles_in_flight, &by);
            for result in ["success", "error"] {
                touch(
                    &self.reconciles,
                    &ReconcileLabels {
                        controller: labels(controller),
                        result: labels(result),
                    },
                );
            }
        }
        for reason in HANDLES_CREATED {
            touch(
                &self.handles_created,
                &ReasonLabels {
                    reason: labels(reason),
                },
            );
        }
        for reason in HANDLES_DELETED {
            touch(
                &self.handles_deleted,
                &ReasonLabels {
                    reason: labels(reason),
                },
            );
        }
        for source in ["warm", "cold"] {
            let source = SourceLabels {
                source: labels(source),
            };
            touch(&self.claim_bound, &source);
            touch(&self.claim_ready, &source);
        }
        for operation in ["CREATE", "UPDATE"] {
            for result in ["allowed", "warned", "denied", "unchecked"] {
                touch(
                    &self.admission_reviews,
                    &AdmissionLabels {
                        operation: labels(operation),
                        result: labels(result),
                    },
                );
            }
        }
        for verb in [
            "get", "list", "watch", "create", "update", "patch", "delete",
        ] {
            touch(&self.api_requests, &VerbLabels { verb: labels(verb) });
        }
    }

    /// Records one timed step.
    pub(crate) fn observe(&self, app: &str, method: &str, success: bool, seconds: f64) {
        self.process_time
            .get_or_create(&ProcessLabels {
                app: app.to_owned(),
                method: method.to_owned(),
                status: if success { "success" } else { "error" }.to_owned(),
                cluster_domain: self.cluster_domain.clone(),
            })
            .observe(seconds);
    }

    /// One reconcile of `controller` is starting; the returned guard counts it as in flight
    /// until dropped.
    pub(crate) fn reconcile_started(&self, controller: &str) -> InFlight {
        let gauge = self
            .reconciles_in_flight
            .get_or_create(&ControllerLabels {
                controller: controller.to_owned(),
            })
            .clone();
        gauge.inc();
        InFlight { gauge }
    }

    /// One reconcile of `controller` ended after `seconds`.
    pub(crate) fn reconciled(&self, controller: &str, success: bool, seconds: f64) {
        self.reconciles
            .get_or_create(&ReconcileLabels {
                controller: controller.to_owned(),
                result: if success { "success" } else { "error" }.to_owned(),
            })
            .observe(seconds);
        if !success {
            self.reconcile_errors
                .get_or_create(&ControllerLabels {
                    controller: controller.to_owned(),
                })
                .inc();
        }
    }

    /// A pool's counts, as its reconcile found them.
    pub(crate) fn set_pool(&self, pool: &PoolLabels, counts: PoolCounts) {
        self.pool_min_available
            .get_or_create(pool)
            .set(counts.min_available);
        self.pool_available
            .get_or_create(pool)
            .set(counts.available);
        self.pool_ready.get_or_create(pool).set(counts.ready);
        self.pool_unready
            .get_or_create(pool)
            .set(counts.available - counts.ready);
        self.pool_taken.get_or_create(pool).set(counts.taken);
    }

    /// A deleted pool's gauges go.
    pub(crate) fn forget_pool(&self, pool: &PoolLabels) {
        for family in [
            &self.pool_min_available,
            &self.pool_available,
            &self.pool_ready,
            &self.pool_unready,
            &self.pool_taken,
        ] {
            family.remove(pool);
        }
    }

    /// A handle this process created, and why.
    pub(crate) fn handle_created(&self, reason: &str) {
        self.handles_created
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// A handle this process deleted, and why.
    pub(crate) fn handle_deleted(&self, reason: &str) {
        self.handles_deleted
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// A claim bound `seconds` after its creation, from a pool (`warm`) or not.
    pub(crate) fn claim_bound(&self, warm: bool, seconds: f64) {
        self.claim_bound
            .get_or_create(&source(warm))
            .observe(seconds);
    }

    /// A claim ready `seconds` after its creation.
    pub(crate) fn claim_ready(&self, warm: bool, seconds: f64) {
        self.claim_ready
            .get_or_create(&source(warm))
            .observe(seconds);
    }

    /// An admission review answered.
    pub(crate) fn admission_review(&self, operation: &str, result: &str) {
        self.admission_reviews
            .get_or_create(&AdmissionLabels {
                operation: operation.to_owned(),
                result: result.to_owned(),
            })
            .inc();
    }

    /// A status (or other guarded) write of `kind` that conflicted and was recomputed.
    pub(crate) fn conflict(&self, kind: &str) {
        self.status_conflicts
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// An object of `kind` newly found invalid (reported in its status).
    pub(crate) fn invalid(&self, kind: &str) {
        self.invalid_resources
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// How many objects of `kind` are set aside now.
    pub(crate) fn set_quarantined(&self, kind: &str, count: usize) {
        self.quarantined_objects
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// An object version of `kind` newly set aside (and reported).
    pub(crate) fn quarantine(&self, kind: &str) {
        self.quarantined
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// One request to the API server, of `verb`.
    pub(crate) fn api_request(&self, verb: &str) {
        self.api_requests
            .get_or_create(&VerbLabels {
                verb: verb.to_owned(),
            })
            .inc();
    }

    /// Whether this process runs the controllers now.
    pub(crate) fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts the claims with `count` at each scrape (`poolboy_claims`); the first one given
    /// serves.
    pub(crate) fn count_claims_with(
        &self,
        count: impl Fn() -> ClaimCounts + Send + Sync + 'static,
    ) {
        let _ = self.claim_counter.set(Box::new(count));
    }

    /// Counts the Events not yet published with `count` at each scrape
    /// (`poolboy_events_waiting`); the first one given serves.
    pub(crate) fn count_waiting_events_with(
        &self,
        count: impl Fn() -> usize + Send + Sync + 'static,
    ) {
        let _ = self.event_counter.set(Box::new(count));
    }

    /// The OpenMetrics text exposition.
    pub(crate) fn encode(&self) -> Result<String, std::fmt::Error> {
        if let Some(count) = self.claim_counter.get() {
            let counts = count();
            for (state, value) in [
                ("bound", counts.bound),
                ("waiting", counts.waiting),
                ("invalid", counts.invalid),
            ] {
                let labels = StateLabels {
                    state: state.to_owned(),
                };
                self.claims.get_or_create(&labels).set(value);
            }
        }
        if let Some(count) = self.event_counter.get() {
            self.events_waiting
                .set(i64::try_from(count()).unwrap_or(i64::MAX));
        }
        if let Some(sample) = process_sample() {
            // A counter follows the sampled total by its increase.
            let increase = sample.cpu_seconds - self.process.cpu_seconds.get();
            if increase > 0.0 {
                self.process.cpu_seconds.inc_by(increase);
            }
            self.process
                .resident_memory_bytes
                .set(sample.resident_memory_bytes);
            self.process.open_fds.set(sample.open_fds);
            self.process
                .start_time_seconds
                .set(sample.start_time_seconds);
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// Counts a reconcile as in flight until dropped (also when the reconcile future is dropped).
pub(crate) struct InFlight {
    gauge: Gauge,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

fn source(warm: bool) -> SourceLabels {
    SourceLabels {
        source: if warm { "warm" } else { "cold" }.to_owned(),
    }
}

/// The process's figures from Linux's `/proc` (`None` elsewhere).
struct ProcessSample {
    cpu_seconds: f64,
    resident_memory_bytes: i64,
    open_fds: i64,
    start_time_seconds: i64,
}

/// `/proc` reports times in USER_HZ, which Linux fixes at 100 for userspace.
const USER_HZ: f64 = 100.0;

fn process_sample() -> Option<ProcessSample> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Fields 14, 15 (utime, stime) and 22 (starttime), counted from 1 with pid and comm.
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
    let cpu_seconds = (field(14)? + field(15)?) / USER_HZ;
    let started_after_boot = field(22)? / USER_HZ;
    let boot_time = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|t| t.trim().parse::<f64>().ok())?;
    let resident_kib = std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())?;
    let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count();
    Some(ProcessSample {
        cpu_seconds,
        resident_memory_bytes: resident_kib.saturating_mul(1024),
        open_fds: i64::try_from(open_fds).unwrap_or(i64::MAX),
        start_time_seconds: (boot_time + started_after_boot) as i64,
    })
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

    #[test]
    fn a_scrape_has_the_process_build_and_reconcile_families() {
        let metrics = Metrics::new("example.com");
        {
            let _in_flight = metrics.reconcile_started("ResourcePool");
            metrics.reconciled("ResourcePool", false, 0.2);
        }
        metrics.claim_bound(true, 0.04);
        let text = metrics.encode().expect("encodes");
        for expected in [
            "poolboy_build_info{version=",
            "process_resident_memory_bytes ",
            "process_cpu_seconds_total ",
            "poolboy_reconcile_duration_seconds_count{controller=\"ResourcePool\",result=\"error\"} 1",
            "poolboy_reconcile_errors_total{controller=\"ResourcePool\"} 1",
            "poolboy_reconciles_in_flight{controller=\"ResourcePool\"} 0",
            "poolboy_claim_bind_seconds_bucket{le=\"0.05\",source=\"warm\"} 1",
        ] {
            assert!(text.contains(expected), "{expected} in:\n{text}");
        }
    }

    #[test]
    fn a_scrape_counts_the_events_waiting_as_it_comes() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        let metrics = Metrics::new("example.com");
        let waiting = Arc::new(AtomicUsize::new(3));
        let counted = waiting.clone();
        metrics.count_waiting_events_with(move || counted.load(Ordering::SeqCst));
        let text = metrics.encode().expect("encodes");
        assert!(text.contains("poolboy_events_waiting 3"), "{text}");
        waiting.store(0, Ordering::SeqCst);
        let text = metrics.encode().expect("encodes");
        assert!(text.contains("poolboy_events_waiting 0"), "{text}");
    }
}

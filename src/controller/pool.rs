//! The ResourcePool controller (§11, Δ§3.3): keeps `minAvailable` unbound handles, at most
//! `maxUnready` of them unready, deletes unhealthy unbound handles when asked, consumes active
//! scalings, and deletes the unbound handles when the pool goes. Exact across processes: every
//! create follows a guarded pool status write that reserves its name, and a scaling's count is
//! raised (guarded) before its handles are made (docs/design.md, "controller::pool").

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::context::{Context, EventKind};
use super::reconciler::{self, Drive, Lifecycle};
use super::write::{self, Halt, OrHalt, PassError, Target, Written};
use crate::api::kinds::{HandleObject, Kinds, PoolObject};
use crate::api::pool::ResourcePoolStatus;
use crate::api::{OperatorDomain, ResourceHandle, ResourcePool, ResourcePoolScaling};
use crate::core::conditions::{Change, became_true, find};
use crate::core::handle::new::handle_for_pool;
use crate::core::lifespan::delay_until;
use crate::core::pool::autoscale::{self, AutoscaleDecision, AutoscaleError, BindHistory};
use crate::core::pool::plan::{
    BoundCounts, PendingHandles, PoolInput, PoolPlan, is_unbound_handle_of_pool, new_handle_names,
    plan_pool, set_pool_validity,
};
use crate::core::pool::refresh::{
    HANDLES_UP_TO_DATE, handle_version, pool_version, provider_specs, set_refresh_condition, stamp,
};
use crate::core::pool::scaling::{
    active_scalings_of_pool, attributed, count_patch, created, decremented, is_active,
    is_scaling_of_pool, remaining,
};
use crate::metrics::{PoolCounts, PoolLabels};
use crate::shutdown::Shutdown;
use crate::store::free_handles::FreeHandles;
use crate::store::pool_index::PoolIndex;
use crate::store::shared_watch::SharedWatch;

/// A scaling's count is lowered from a fresh read this many times before giving up (Δ B16).
const SCALING_COUNT_ATTEMPTS: usize = 12;

/// The shortest time between two writes of a pool's status that only update its counts.
const COUNTS_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub(crate) enum PoolError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("cannot serialise a JSON patch: {0}")]
    Patch(#[from] serde_json::Error),
    #[error("ResourcePoolScaling {0} kept changing under guarded writes; retrying")]
    ScalingContended(String),
    #[error("creating ResourceHandle {name}: {source}")]
    Create {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The pool controller and the index of handles its reconciles read. The index (and the store
/// under it) is fed by the same watch that wakes pools, and is updated before the pool is
/// woken: a reconcile woken by a bind or a deletion always sees it (a separate store could
/// still be behind).
pub(crate) struct PoolController {
    controller: Controller<PoolObject>,
    handles: PoolIndex,
    memory: Memories,
    later_wakes: LaterWakes,
}

impl PoolController {
    /// The store of pools, the index every controller reads (`Context::stores`).
    pub(crate) fn store(&self) -> Store<PoolObject> {
        self.controller.store()
    }

    /// The index of each pool's handles, which the claim controller reads too.
    pub(crate) fn handles(&self) -> PoolIndex {
        self.handles.clone()
    }
}

/// The controller, watching pools of the operator namespace, and following the broker's
/// handle watch: a handle change that concerns its pool wakes it (`PoolIndex::following`),
/// so a bind refills at once. The creation of a handle whose name the pool's status reserves
/// does not: the pass that reserved it counted it, and the next finds it shown. Its creation
/// event often comes before the pool watch shows that status write, so a name this process
/// reserved counts as reserved from its own memory too. What would only wait for the pool's
/// next status write wakes the pool when it may be written ([`LaterWakes`]): a change of only
/// what the pool counts (an unbound handle's readiness or health, a claimed handle's readiness
/// or deletion), and a bind whose refill may wait ([`PoolMemory::patience`]).
pub(crate) fn controller(
    client: &Client,
    kinds: &Kinds,
    operator_namespace: &str,
    (handles, free): (&mut SharedWatch<HandleObject>, FreeHandles),
) -> PoolController {
    let main = Api::<PoolObject>::namespaced_with(client.clone(), operator_namespace, &kinds.pool);
    let config = crate::store::shared_watch::watch_config().any_semantic();
    let controller = reconciler::forgetting_controller(main, config, kinds.pool.clone());
    let pool_kind = kinds.pool.clone();
    let (wake, woken) = futures::channel::mpsc::unbounded();
    let later_wakes = LaterWakes::default();
    let memory = Memories::default();
    let (later, patient, pools) = (later_wakes.clone(), memory.clone(), controller.store());
    let handles = PoolIndex::following(
        handles,
        free,
        kinds.stored_handle.clone(),
        operator_namespace,
        move |concern| {
            let pool =
                ObjectRef::new_with(concern.pool, pool_kind.clone()).within(concern.namespace);
            let waits = match concern.bind {
                true => pools
                    .get(&pool)
                    .and_then(|stored| patient.bind_may_wait(&stored.metadata)),
                false => None,
            };
            if concern.counts_only {
                later.wake_at(pool, Instant::now() + COUNTS_INTERVAL, &wake);
            } else if let Some(until) = waits {
                later.wake_at(pool, until, &wake);
            } else {
                // Closed only when the operator stops.
                let _ = wake.unbounded_send((pool, concern.created.map(str::to_owned)));
            }
        },
    );
    let pools = controller.store();
    let reserved = memory.clone();
    let woken = woken.filter_map(move |(pool, created): Woken| {
        let counted = created.is_some_and(|handle| {
            pools.get(&pool).is_some_and(|pool| {
                reserves(&pool, &handle) || reserved.is_pending(&pool.metadata, &handle)
            })
        });
        std::future::ready((!counted).then_some(pool))
    });
    let controller = controller.reconcile_on(woken);
    PoolController {
        controller,
        handles,
        memory,
        later_wakes,
    }
}

/// A pool, and the handle whose creation woke it.
type Woken = (ObjectRef<PoolObject>, Option<String>);

/// Wakes a pool at an instant, once for all the changes that wait for it; the earliest
/// instant asked for wins. What the pool does of a change of only what it counts (its unbound
/// handles' readiness or health, its claimed handles' readiness or deletion) is mostly its
/// status's counts, written at most once a [`COUNTS_INTERVAL`] anyway: so a handle's getting
/// ready after the bind that made the pool create it costs the pool one pass, not one now and
/// one when the counts may be written, and the deletions of many bound handles cost it one
/// pass a second, not two each. The caps and the autoscale that weigh those counts
/// (`maxUnready`, unhealthy deletion, `maxSize`, `maxConcurrent`) act at most an interval
/// later. A pass of the pool that begins meanwhile reads the changes, and whatever it must
/// wait for it waits for itself: the wake is dropped then.
#[derive(Clone, Default)]
struct LaterWakes(Arc<Mutex<HashMap<ObjectRef<PoolObject>, Instant>>>);

impl LaterWakes {
    fn wake_at(&self, pool: ObjectRef<PoolObject>, at: Instant, wake: &UnboundedSender<Woken>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            let _ = wake.unbounded_send((pool, None));
            return;
        };
        let mut due = self.due();
        if due.get(&pool).is_some_and(|due| *due <= at) {
            return;
        }
        due.insert(pool.clone(), at);
        let (later, wake) = (self.clone(), wake.clone());
        runtime.spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            let mut due = later.due();
            if due.get(&pool) == Some(&at) {
                due.remove(&pool);
                drop(due);
                // Closed only when the operator stops.
                let _ = wake.unbounded_send((pool, None));
            }
        });
    }

    /// A pass of `pool` begins: it reads every change a wake to come is for.
    fn served(&self, pool: &ObjectRef<PoolObject>) {
        self.due().remove(pool);
    }

    /// The pools with a wake to come, and when.
    fn due(&self) -> MutexGuard<'_, HashMap<ObjectRef<PoolObject>, Instant>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What pool reconciles share: the operator context (whose stores hold the index of each
/// pool's handles), and what this process remembers of each pool.
struct PoolContext {
    ctx: Arc<Context>,
    memory: Memories,
    later_wakes: LaterWakes,
}

/// What this process remembers of each pool between its reconciles, by uid (so that a pool
/// deleted and created again under the same name starts afresh); a pool's goes when its
/// finalizer has run, or when it is found gone ([`Lifecycle::gone`]). Shared by the reconciles and the filter of the pool's wakes.
#[derive(Clone, Default)]
struct Memories(Arc<Mutex<HashMap<String, PoolMemory>>>);

impl Memories {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, PoolMemory>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether this process reserved handle `name` for the pool of `meta` and its store does
    /// not show it yet.
    fn is_pending(&self, meta: &ObjectMeta, name: &str) -> bool {
        self.lock()
            .get(&memory_key(meta))
            .is_some_and(|memory| memory.pending.is_pending(name))
    }

    /// When a pass woken by a bind of one of the pool's handles would do what it does: its
    /// refill waits for the status write then; `None` when it would do more now, or the pool
    /// is in a pass. Counts the bind against the pool's [`Patience`].
    fn bind_may_wait(&self, meta: &ObjectMeta) -> Option<Instant> {
        let mut all = self.lock();
        let patience = all.get_mut(&memory_key(meta))?.patience.as_mut()?;
        if patience.binds == 0 || patience.until <= Instant::now() {
            return None;
        }
        patience.binds -= 1;
        Some(patience.until)
    }

    /// Forgets every pool but `pools` (memory is by uid: a pool gone and one created again
    /// under its name are two).
    fn keep_only(&self, pools: &[Arc<PoolObject>]) {
        let live: HashSet<String> = pools
            .iter()
            .map(|pool| memory_key(&pool.metadata))
            .collect();
        self.lock().retain(|uid, _| live.contains(uid));
    }

    /// A pass of the pool of `meta` begins: what it ends with is the pool's patience then.
    fn pass_begins(&self, meta: &ObjectMeta) {
        if let Some(memory) = self.lock().get_mut(&memory_key(meta)) {
            memory.patience = None;
        }
    }
}

/// What this process remembers of a pool between its reconciles.
#[derive(Default)]
struct PoolMemory {
    pending: PendingHandles,
    /// The binds of the pool's handles it saw, for `spec.autoscale`.
    binds: BindHistory,
    /// When this process last wrote the pool's status.
    status_written: Option<Instant>,
    /// Set by a pass that left the pool at its target, until its next status write may be
    /// made: so many binds would wake a pass whose refill only waits for that write.
    patience: Option<Patience>,
}

/// Until when, and for how many more binds, a bind's refill waits for the pool's next status
/// write ([`PoolPlan::binds_may_wait`](crate::core::pool::plan::PoolPlan)).
#[derive(Clone, Copy, Debug)]
struct Patience {
    until: Instant,
    binds: usize,
}

impl PoolContext {
    /// The index of each pool's handles.
    fn handles(&self) -> &PoolIndex {
        &self.ctx.stores.pool_handles
    }

    /// Runs `f` on the memory of `pool`.
    fn with_memory<R>(&self, pool: &ResourcePool, f: impl FnOnce(&mut PoolMemory) -> R) -> R {
        f(self
            .memory
            .lock()
            .entry(memory_key(&pool.metadata))
            .or_default())
    }

    /// Runs `f` on the handles this process created for `pool` and its store does not show yet.
    fn with_pending<R>(&self, pool: &ResourcePool, f: impl FnOnce(&mut PendingHandles) -> R) -> R {
        self.with_memory(pool, |memory| f(&mut memory.pending))
    }

    fn forget(&self, pool: &ResourcePool) {
        self.memory.lock().remove(&memory_key(&pool.metadata));
    }

    /// How long a status write of `pool` that only updates its counts waits, if it must: at
    /// most one a [`COUNTS_INTERVAL`] per pool.
    fn counts_wait(&self, pool: &ResourcePool) -> Option<Duration> {
        let since = self
            .with_memory(pool, |memory| memory.status_written)?
            .elapsed();
        COUNTS_INTERVAL.checked_sub(since).filter(|w| !w.is_zero())
    }

    fn status_written(&self, pool: &ResourcePool) {
        self.with_memory(pool, |memory| memory.status_written = Some(Instant::now()));
    }
}

/// Whether `pool`'s status reserves handle `name`: it lists each handle of the pool, a new one
/// before it is created (Δ§3.3).
fn reserves(pool: &PoolObject, name: &str) -> bool {
    pool.status
        .as_ref()
        .and_then(|status| status.resource_handles.as_deref())
        .is_some_and(|entries| entries.iter().any(|entry| entry.name == name))
}

fn memory_key(meta: &ObjectMeta) -> String {
    meta.uid
        .clone()
        .or_else(|| meta.name.clone())
        .unwrap_or_default()
}

/// Runs `controller` until `shutdown`; `triggers` wake it from outside its watches.
pub(crate) async fn run(
    controller: PoolController,
    ctx: Arc<Context>,
    triggers: UnboundedReceiver<ObjectRef<PoolObject>>,
    concurrency: u16,
    shutdown: Shutdown,
) {
    let pool_ctx = Arc::new(PoolContext {
        ctx,
        memory: controller.memory,
        later_wakes: controller.later_wakes,
    });
    let drive = Drive {
        triggers: Some(triggers),
        backlog: None,
        concurrency,
        shutdown,
    };
    reconciler::run(controller.controller, drive, pool_ctx).await;
}

impl Lifecycle for PoolContext {
    const KIND: &'static str = "ResourcePool";
    type Stored = PoolObject;
    type Object = PoolObject;
    type Error = PoolError;
    type Carry = ();

    fn context(&self) -> &Context {
        &self.ctx
    }

    fn unpack(stored: &PoolObject) -> Result<PoolObject, PoolError> {
        Ok(stored.clone())
    }

    /// A pool whose finalizer this process did not run (another process released it, or the
    /// pool was deleted while the watch was away): what this process remembers of it goes, and
    /// so do its gauges, which would go on showing a pool that is no more.
    fn gone(&self, namespace: Option<&str>, name: &str) {
        self.memory.keep_only(&self.ctx.stores.pools.state());
        self.ctx.metrics.forget_pool(&PoolLabels {
            name: name.to_owned(),
            namespace: namespace.unwrap_or_default().to_owned(),
        });
    }

    /// Counting from a store that has not listed yet would overfill the pool.
    async fn prepare(&self) {
        self.handles().wait_until_listed().await;
    }

    async fn finalize(&self, pool: &PoolObject, _: &mut ()) -> Result<Action, Halt<PoolError>> {
        finalize(pool, self).await
    }

    async fn pass(&self, pool: PoolObject, _: &mut ()) -> Result<Action, Halt<PoolError>> {
        self.memory.pass_begins(&pool.metadata);
        let key = ObjectRef::new_with(&pool.name_any(), self.ctx.kinds.pool.clone());
        self.later_wakes
            .served(&key.within(&pool.namespace().unwrap_or_default()));
        let finalizer = self.ctx.domain().finalizer();
        let api = self.ctx.pools_api();
        let pool = write::add_finalizer(&api, pool, &finalizer)
            .await
            .or_halt()?;
        pass(&pool, self).await
    }

    async fn reread(&self, _: Option<&str>, name: &str) -> Result<Option<PoolObject>, PoolError> {
        Ok(self.ctx.pools_api().get_opt(name).await?)
    }
}

impl PassError for PoolError {}

/// What a pass reads of a pool and its handles.
struct Observed {
    /// The pool's unclaimed handles, and those of them unbound.
    unclaimed: Vec<Arc<HandleObject>>,
    unbound: Vec<Arc<ResourceHandle>>,
    /// Names reserved in the pool status that the store does not show yet.
    pending: Vec<String>,
    scaling: Option<ResourcePoolScaling>,
    bound: BoundCounts,
    /// The template of every new handle; its failure is the pool's configuration problem.
    template: Result<NewHandle, String>,
    /// The unbound handles of an earlier version, refreshed (not while the pool cannot make
    /// current ones).
    stale: BTreeSet<String>,
    autoscale: Option<Result<AutoscaleDecision, AutoscaleError>>,
}

impl Observed {
    /// Why the pool cannot do all it is asked: its template or its autoscale.
    fn problem(&self) -> Option<String> {
        match (&self.template, &self.autoscale) {
            (Err(problem), _) => Some(problem.clone()),
            (_, Some(Err(problem))) => Some(problem.to_string()),
            _ => None,
        }
    }

    fn decision(&self) -> Option<&AutoscaleDecision> {
        self.autoscale.as_ref().and_then(|a| a.as_ref().ok())
    }
}

/// One observe → plan → act pass (§11, Δ§3.3).
async fn pass(pool_object: &PoolObject, pctx: &PoolContext) -> Result<Action, Halt<PoolError>> {
    let ctx = &pctx.ctx;
    let now = ctx.now();
    let pool = Kinds::pool_of(pool_object);
    let seen = observe(pctx, &pool, now).await?;
    let plan = plan_pool(&PoolInput {
        pool: &pool,
        unbound: &seen.unbound,
        pending: &seen.pending,
        scaling_demand: seen.scaling.as_ref().map_or(0, remaining),
        stale: &seen.stale,
        autoscale: seen.decision(),
        bound: seen.bound.count,
        bound_unready: seen.bound.unready,
    });
    if let Some(cap) = plan.capped_by {
        tracing::debug!(pool = %pool.name_any(), %cap, "the pool creates fewer handles than it wants");
    }
    delete_doomed(pctx, &pool, &plan, &seen.unclaimed).await?;
    // A small refill waits for the next status write and reserves its names in it (a pool
    // with a problem is not looked at again on a clock, so it refills at once).
    let refill_due = match plan.refill_may_wait && seen.problem().is_none() {
        true => pctx.counts_wait(&pool),
        false => None,
    };
    let new_names: Vec<String> = match &seen.template {
        Ok(_) if plan.create > 0 && refill_due.is_none() => {
            let taken =
                |name: &str| pctx.handles().has(name) || seen.pending.iter().any(|p| p == name);
            new_handle_names(plan.create, taken, &mut rand::rng())
        }
        _ => Vec::new(),
    };
    let counts_due = reserve(pctx, pool_object, &pool, &seen, &plan, &new_names, now).await?;
    let for_scaling = reserve_for_scaling(pctx, &pool, &seen, &new_names, now).await?;
    set_metrics(ctx, &pool, &seen, &plan);
    if let Ok(template) = &seen.template
        && !new_names.is_empty()
    {
        let for_scaling = for_scaling.map(|(scaling, count)| {
            let scaling_name = scaling.name_any();
            let labelled = new_handle_template(&pool, ctx, now, Some(&scaling_name))
                .map_or_else(|_| template.handle.clone(), |t| t.handle);
            (scaling_name, labelled, count)
        });
        create_handles(pctx, &pool, &template.handle, for_scaling, &new_names).await?;
    }
    if plan.binds_may_wait > 0 && new_names.len() == plan.create && seen.problem().is_none() {
        pctx.with_memory(&pool, |memory| {
            let until = memory.status_written.map(|at| at + COUNTS_INTERVAL);
            memory.patience = until
                .filter(|until| *until > Instant::now())
                .map(|until| Patience {
                    until,
                    binds: plan.binds_may_wait,
                });
        });
    }
    if seen.problem().is_some() {
        // Bad input: wait for the pool or its provider to change (the provider watch wakes it).
        return Ok(Action::await_change());
    }
    let due = counts_due.into_iter().chain(refill_due).min();
    Ok(next_look(pctx, &pool, now, due))
}

/// Reads what the pass decides from: the handles the store shows, the names reserved but not
/// shown yet (confirmed with a GET once they are overdue), the scaling to consume, and the
/// template and version of a new handle.
async fn observe(
    pctx: &PoolContext,
    pool: &ResourcePool,
    now: DateTime<Utc>,
) -> Result<Observed, Halt<PoolError>> {
    let ctx = &pctx.ctx;
    let pending = pending_names(pctx, pool, now).await?;
    // Only the pool's unclaimed handles are read one by one; the rest comes counted. Read
    // after the pending names are: a handle that shows up in between is then both, and
    // counted once (`plan_pool`), never not at all.
    let unclaimed = pctx.handles().unclaimed(pool);
    let unbound = pctx.handles().unbound(pool, &unclaimed, ctx.domain());
    let scaling = consumed_scaling(ctx, pool, now).await?;
    let template = new_handle_template(pool, ctx, now, None);
    let stale: BTreeSet<String> = match &template {
        Ok(new) => unbound
            .iter()
            .filter(|h| handle_version(h, &new.providers, ctx.domain()) != new.version)
            .map(|h| h.name_any())
            .collect(),
        Err(_) => BTreeSet::new(),
    };
    let autoscale = autoscale(pctx, pool, &unbound, now);
    Ok(Observed {
        bound: pctx.handles().bound(pool),
        unclaimed,
        unbound,
        pending,
        scaling,
        template,
        stale,
        autoscale,
    })
}

/// The names reserved in the pool status (by this process or another) that the store does not
/// show yet; one overdue is looked up, and forgotten when it does not exist.
async fn pending_names(
    pctx: &PoolContext,
    pool: &ResourcePool,
    now: DateTime<Utc>,
) -> Result<Vec<String>, PoolError> {
    let listed: Vec<&str> = pool
        .status
        .as_ref()
        .and_then(|s| s.resource_handles.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    let to_confirm = pctx.with_pending(pool, |memory| {
        let shows = |name: &str| pctx.handles().shows(pool, name);
        memory.observe(shows, listed.iter().copied(), now);
        memory.to_confirm(now)
    });
    for name in to_confirm {
        let exists = pctx.ctx.handles_api().get_opt(&name).await?.is_some();
        pctx.with_pending(pool, |memory| match exists {
            true => memory.confirm(&name),
            false => memory.settle(&name, now),
        });
    }
    Ok(pctx.with_pending(pool, |memory| memory.names()))
}

/// Deletes the unbound handles the plan removes; Δ§3.3 step 2: the scaling that made one
/// makes a replacement. Only the process whose delete went through lowers the count, so it
/// is lowered once.
async fn delete_doomed(
    pctx: &PoolContext,
    pool: &ResourcePool,
    plan: &PoolPlan,
    unclaimed: &[Arc<HandleObject>],
) -> Result<(), Halt<PoolError>> {
    let ctx = &pctx.ctx;
    let scaling_label = ctx.domain().resource_pool_scaling_name();
    for (doomed, removal) in &plan.delete {
        let Some(handle) = unclaimed.iter().find(|h| h.name_any() == *doomed) else {
            continue;
        };
        let reason = removal.as_str();
        tracing::info!(pool = %pool.name_any(), handle = %doomed, reason, "deleting unbound ResourceHandle");
        if !delete_unbound(&ctx.handles_api(), handle, pool, ctx.domain()).await? {
            continue;
        }
        ctx.metrics.handle_deleted(reason);
        if let Some(scaling_name) = handle.labels().get(&scaling_label) {
            release_scaling_handles(ctx, scaling_name, 1).await?;
        }
    }
    Ok(())
}

/// Writes the pool's status, reserving `new_names` (guarded: of two processes filling the
/// pool, one wins), and announces what it says that is new. A status that only brings the
/// counts up to date waits its turn (in a burst every bind changes them, and one write per
/// bind would be a tenth of a bind's writes): how long, when it waits.
async fn reserve(
    pctx: &PoolContext,
    pool_object: &PoolObject,
    pool: &ResourcePool,
    seen: &Observed,
    plan: &PoolPlan,
    new_names: &[String],
    now: DateTime<Utc>,
) -> Result<Option<Duration>, Halt<PoolError>> {
    let ctx = &pctx.ctx;
    if !new_names.is_empty() {
        tracing::debug!(pool = %pool.name_any(), unbound = seen.unbound.len(),
            pending = ?seen.pending, new = ?new_names, "the pool reserves new handles");
    }
    let problem = seen.problem();
    let current = pool.status.as_ref();
    let mut desired = plan.status(new_names, current);
    if let Some(decision) = seen.decision() {
        desired.autoscale = Some(decision.status.clone());
    }
    let generation = pool.metadata.generation;
    let validity = set_pool_validity(&mut desired, problem.as_deref(), generation, now);
    let version = seen.template.as_ref().ok().map(|t| &t.version);
    let refresh = version.map_or(Change::Unchanged, |version| {
        let unbound = seen.unbound.len();
        set_refresh_condition(&mut desired, version, plan.stale, unbound, generation, now)
    });
    let counts_wait = match new_names.is_empty() && !validity.is_news() && !refresh.is_news() {
        true => pctx.counts_wait(pool),
        false => None,
    };
    if current != Some(&desired) && counts_wait.is_none() {
        let patch = json!({ "status": &desired });
        write::merge(&ctx.pools_api(), pool_object, Target::Status, &patch)
            .await
            .or_halt()?;
        pctx.status_written(pool);
    }
    // The new names are reserved now: count them until the store shows them; and they are
    // made unbound, so that a bind of one before the store shows it is a bind all the same.
    pctx.with_memory(pool, |memory| {
        for new in new_names {
            memory.pending.expect(new, now);
        }
        memory.binds.made(new_names);
    });
    if refresh == Change::Transitioned {
        refresh_event(ctx, pool_object, current, &desired, plan.stale).await;
    }
    if validity.is_news()
        && let Some(problem) = problem
    {
        ctx.metrics.invalid("ResourcePool");
        let kind = &ctx.kinds.pool;
        ctx.event(
            pool_object,
            kind,
            EventKind::Warning,
            "InvalidResourcePool",
            problem,
        )
        .await;
    }
    Ok(counts_wait.filter(|_| current != Some(&desired)))
}

/// The first new handles are the scaling's: its count is raised before they are created,
/// guarded, so that no other pass (here or in another process) creates them again. The
/// scaling and how many of `new_names` are its; a conflict when another writer moved the
/// count (these names will then not be created).
async fn reserve_for_scaling<'a>(
    pctx: &PoolContext,
    pool: &ResourcePool,
    seen: &'a Observed,
    new_names: &[String],
    now: DateTime<Utc>,
) -> Result<Option<(&'a ResourcePoolScaling, usize)>, Halt<PoolError>> {
    let for_scaling = match &seen.scaling {
        Some(scaling) if !new_names.is_empty() => {
            let count = attributed(new_names.len(), remaining(scaling));
            (count > 0).then_some((scaling, count))
        }
        _ => None,
    };
    if let Some((scaling, count)) = for_scaling
        && !reserve_scaling_handles(&pctx.ctx, scaling, count, now).await?
    {
        pctx.with_pending(pool, |memory| {
            for new in new_names {
                memory.settle(new, now);
            }
        });
        return Err(Halt::Conflict);
    }
    Ok(for_scaling)
}

fn set_metrics(ctx: &Context, pool: &ResourcePool, seen: &Observed, plan: &PoolPlan) {
    let labels = PoolLabels {
        name: pool.name_any(),
        namespace: pool.namespace().unwrap_or_default(),
    };
    let min_available = seen
        .decision()
        .map_or(pool.spec.min_available.unwrap_or(0), |d| d.status.target);
    let counts = PoolCounts {
        min_available,
        available: plan.count.available,
        ready: plan.count.ready,
        taken: i64::try_from(seen.bound.count).unwrap_or(i64::MAX),
    };
    ctx.metrics.set_pool(&labels, counts);
}

/// When to look at the pool again: a reservation whose handle never shows up stops counting
/// then, and binds leave the autoscale window; counts and a refill that waited (`due`) are
/// written then too.
fn next_look(
    pctx: &PoolContext,
    pool: &ResourcePool,
    now: DateTime<Utc>,
    due: Option<Duration>,
) -> Action {
    let next = pctx.with_memory(pool, |memory| {
        let demand = pool
            .spec
            .autoscale
            .as_ref()
            .and_then(|a| autoscale::window(a).ok())
            .and_then(|window| memory.binds.next_change(window, now));
        memory.pending.next_expiry().into_iter().chain(demand).min()
    });
    let next = next
        .map(|expiry| delay_until(expiry, pctx.ctx.now()))
        .into_iter()
        .chain(due)
        .min();
    match next {
        Some(delay) => Action::requeue(delay),
        None => Action::await_change(),
    }
}

/// What `spec.autoscale` decides for this pass, after recording the binds the
/// pool's `handles` show (`unbound`: those of them unbound); `None` without `spec.autoscale`.
fn autoscale(
    pctx: &PoolContext,
    pool: &ResourcePool,
    unbound: &[Arc<ResourceHandle>],
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Result<AutoscaleDecision, AutoscaleError>> {
    let Some(spec) = pool.spec.autoscale.as_ref() else {
        // A pool whose autoscale was taken away forgets the binds it counted.
        pctx.with_memory(pool, |memory| memory.binds = BindHistory::default());
        return None;
    };
    let window = match autoscale::window(spec) {
        Ok(window) => window,
        Err(error) => return Some(Err(error)),
    };
    let unbound = unbound
        .iter()
        .map(|h| h.metadata.name.as_deref().unwrap_or_default());
    let bound = |name: &str| pctx.handles().is_claimed(name);
    let provisioning = pctx.handles().provisioning_time(pool);
    let previous = pool.status.as_ref().and_then(|s| s.autoscale.as_ref());
    pctx.with_memory(pool, |memory| {
        memory.binds.observe(unbound, bound, window, now);
        Some(autoscale::decide(
            spec,
            pool.spec.min_available,
            &memory.binds,
            provisioning,
            previous.map(|p| p.target),
            now,
        ))
    })
}

/// The handle a pool creates, without its name, the pool version it is stamped with, and the
/// specs of the providers that version digests.
struct NewHandle {
    handle: ResourceHandle,
    version: String,
    providers: BTreeMap<String, serde_json::Value>,
}

/// The handle the pool creates, without its name, stamped with the pool's version; an error
/// message a pool author can act on when the pool's provider is missing or invalid or its
/// lifespan does not parse.
fn new_handle_template(
    pool: &ResourcePool,
    ctx: &Context,
    now: chrono::DateTime<chrono::Utc>,
    scaling: Option<&str>,
) -> Result<NewHandle, String> {
    let provider_lifespan = match &pool.spec.provider {
        Some(provider) => ctx.providers(|catalog| {
            catalog
                .get(&provider.name)
                .map(|compiled| compiled.spec().lifespan.clone())
                .map_err(|e| format!("spec.provider.name: {e}"))
        })?,
        None => None,
    };
    let mut handle = handle_for_pool(pool, provider_lifespan.as_ref(), scaling, ctx.domain(), now)
        .map_err(|e| format!("spec.lifespan: {e}"))?;
    let providers = ctx.providers(|c| provider_specs(c, &handle));
    let version = pool_version(&handle, &providers, ctx.domain());
    stamp(&mut handle, &version, ctx.domain());
    Ok(NewHandle {
        handle,
        version,
        providers,
    })
}

/// A Normal Event when the pool starts refreshing its unbound handles, or has refreshed them.
async fn refresh_event(
    ctx: &Context,
    pool: &PoolObject,
    before: Option<&ResourcePoolStatus>,
    after: &ResourcePoolStatus,
    stale: usize,
) {
    if let Some((reason, note)) = refresh_news(before, after, stale) {
        ctx.event(pool, &ctx.kinds.pool, EventKind::Normal, reason, note)
            .await;
    }
}

/// The reason and note of a refresh Event, when the `HandlesUpToDate` condition changed from
/// `before` to `after`: `stale` handles are being replaced, or the last was; none for a pool
/// that had no refresh to do.
fn refresh_news(
    before: Option<&ResourcePoolStatus>,
    after: &ResourcePoolStatus,
    stale: usize,
) -> Option<(&'static str, String)> {
    let before = before.and_then(|s| s.conditions.as_deref());
    if stale > 0 {
        let note = format!(
            "{stale} unbound handles are of an earlier version of the pool or its providers: \
             replacing them"
        );
        return Some(("RefreshingHandles", note));
    }
    let had_condition = before.is_some_and(|c| find(c, HANDLES_UP_TO_DATE).is_some());
    (had_condition && became_true(before, after.conditions.as_deref(), HANDLES_UP_TO_DATE)).then(
        || {
            let note = "every unbound handle is of the pool's current version".to_owned();
            ("RefreshedHandles", note)
        },
    )
}

/// Creates the reserved handles; the first `count` of them from the scaling's (labelled)
/// template when `scaling` is `(name, template, count)`. A failed create stops being expected,
/// so the next pass neither counts it nor keeps it in the status; a failed scaling handle
/// gives its count back to the scaling.
async fn create_handles(
    pctx: &PoolContext,
    pool: &ResourcePool,
    template: &ResourceHandle,
    scaling: Option<(String, ResourceHandle, usize)>,
    names: &[String],
) -> Result<(), PoolError> {
    let ctx = &pctx.ctx;
    let api = ctx.handles_api();
    let pool_name = pool.name_any();
    let mut failure = None;
    let mut scaling_failures = 0i64;
    for (index, name) in names.iter().enumerate() {
        let for_scaling = scaling
            .as_ref()
            .filter(|(_, _, count)| index < *count)
            .map(|(scaling_name, labelled, _)| (scaling_name, labelled));
        let mut handle = for_scaling.map_or(template, |(_, t)| t).clone();
        handle.metadata.name = Some(name.clone());
        let object = ctx.kinds.handle_object(handle);
        let made = match write::create(&api, &object).await {
            Ok(Written::Done(_)) => Ok(()),
            // A name taken meanwhile: the next pass reserves another.
            Ok(Written::Conflict | Written::Gone) => Err(None),
            Err(source) => Err(Some(source)),
        };
        match made {
            Ok(()) => {
                ctx.metrics.handle_created("pool");
                match for_scaling {
                    Some((scaling_name, _)) => tracing::info!(
                        pool = %pool_name, handle = %name, scaling = %scaling_name,
                        "created ResourceHandle for pool scaling"
                    ),
                    None => {
                        tracing::info!(pool = %pool_name, handle = %name, "created ResourceHandle for pool");
                    }
                }
            }
            Err(source) => {
                pctx.with_pending(pool, |memory| memory.settle(name, ctx.now()));
                if for_scaling.is_some() {
                    scaling_failures += 1;
                }
                if let Some(source) = source {
                    failure.get_or_insert(PoolError::Create {
                        name: name.clone(),
                        source,
                    });
                }
            }
        }
    }
    if let Some((scaling_name, _, _)) = &scaling
        && scaling_failures > 0
    {
        release_scaling_handles(ctx, scaling_name, scaling_failures).await?;
    }
    failure.map_or(Ok(()), Err)
}

/// The scaling this pass consumes (Δ§3.3 step 4): the first of the pool's active scalings,
/// per the store, that a fresh read confirms active. The store can lag behind the count this
/// process just wrote; the fresh read keeps a scaling from being filled twice. A scaling the
/// store shows done while it is active again comes with a watch event that wakes the pool.
async fn consumed_scaling(
    ctx: &Context,
    pool: &ResourcePool,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<ResourcePoolScaling>, PoolError> {
    let cached: Vec<ResourcePoolScaling> = ctx
        .stores
        .scalings
        .state()
        .iter()
        .map(|s| Kinds::scaling_of(s))
        .collect();
    let api = ctx.scalings_api();
    for candidate in active_scalings_of_pool(&cached, pool, ctx.domain(), now) {
        if let Some(fresh) = api.get_opt(&candidate.name_any()).await? {
            let fresh = Kinds::scaling_of(&fresh);
            if is_scaling_of_pool(&fresh, pool) && is_active(&fresh, ctx.domain(), now) == Ok(true)
            {
                return Ok(Some(fresh));
            }
        }
    }
    Ok(None)
}

/// Raises `scaling`'s count by `count` if it is still what this pass read (Δ B16 `test`);
/// `false` when another writer moved it (or the scaling is gone): the pass is recomputed.
async fn reserve_scaling_handles(
    ctx: &Context,
    scaling: &ResourcePoolScaling,
    count: usize,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<bool, PoolError> {
    let raised = created(scaling).saturating_add(i64::try_from(count).unwrap_or(i64::MAX));
    let patch = Patch::Json::<()>(count_patch(scaling, raised, now));
    let api = ctx.scalings_api();
    let written = write::send(&api, &scaling.name_any(), Target::Status, &patch).await?;
    Ok(matches!(written, Written::Done(_)))
}

/// Lowers the count of scaling `name` by `count`, not below 0, from a fresh read each time
/// another writer got in first (Δ B16: up to 12 attempts); a scaling that is gone is ignored.
/// The lower count re-activates the scaling, whose watch event wakes the pool for the
/// replacement.
async fn release_scaling_handles(ctx: &Context, name: &str, count: i64) -> Result<(), PoolError> {
    let api = ctx.scalings_api();
    for _ in 0..SCALING_COUNT_ATTEMPTS {
        let Some(object) = api.get_opt(name).await? else {
            return Ok(());
        };
        let scaling = Kinds::scaling_of(&object);
        let lowered = decremented(created(&scaling), count);
        if lowered == created(&scaling) {
            return Ok(());
        }
        let patch = Patch::Json::<()>(count_patch(&scaling, lowered, ctx.now()));
        match write::send(&api, name, Target::Status, &patch).await? {
            Written::Done(_) => {
                tracing::info!(scaling = %name, count = lowered, "lowered ResourcePoolScaling count");
                return Ok(());
            }
            Written::Gone => return Ok(()),
            Written::Conflict => {}
        }
    }
    Err(PoolError::ScalingContended(name.to_owned()))
}

/// Pool deletion (§11 step 9, Δ§3.3): deletes every unbound handle of the pool (bound ones
/// stay, with their pool reference and labels), then removes every Poolboy finalizer.
async fn finalize(pool_object: &PoolObject, pctx: &PoolContext) -> Result<Action, Halt<PoolError>> {
    let ctx = &pctx.ctx;
    let pool = Kinds::pool_of(pool_object);
    let name = pool.name_any();
    let handles_api = ctx.handles_api();
    for handle in &pctx.handles().unclaimed(&pool) {
        if is_unbound_handle_of_pool(&**handle, &pool, ctx.domain())
            && delete_unbound(&handles_api, handle, &pool, ctx.domain()).await?
        {
            ctx.metrics.handle_deleted("pool_deleted");
        }
    }
    // Handles created but not shown by the store yet: look them up.
    let pending = pctx.with_pending(&pool, |memory| memory.names());
    for pending_name in pending {
        if pctx.handles().shows(&pool, &pending_name) {
            continue;
        }
        if let Some(handle) = handles_api.get_opt(&pending_name).await?
            && delete_unbound(&handles_api, &handle, &pool, ctx.domain()).await?
        {
            ctx.metrics.handle_deleted("pool_deleted");
        }
    }
    tracing::info!(pool = %name, "deleted the unbound ResourceHandles of a deleted pool");

    let domain = ctx.domain();
    let ours = |f: &str| domain.is_poolboy_finalizer(f);
    write::release_finalizers(&ctx.pools_api(), pool_object, ours)
        .await
        .or_halt()?;
    // Deleted now: nothing of it is worth remembering (the write layer forgets it with the
    // watch's delete event).
    pctx.forget(&pool);
    let labels = PoolLabels {
        name,
        namespace: pool.namespace().unwrap_or_default(),
    };
    ctx.metrics.forget_pool(&labels);
    Ok(Action::await_change())
}

/// Deletes `handle` if it is still an unbound handle of `pool`; `true` when this call
/// deleted it. A handle bound in the meantime is never deleted (`write::delete_while`); one
/// that keeps changing halts the pass, recomputed from a fresh read.
async fn delete_unbound(
    api: &Api<HandleObject>,
    handle: &HandleObject,
    pool: &ResourcePool,
    domain: &OperatorDomain,
) -> Result<bool, Halt<PoolError>> {
    let still_spare = |h: &HandleObject| is_unbound_handle_of_pool(h, pool, domain);
    match write::delete_while(api, handle, 2, still_spare).await? {
        Written::Done(()) => Ok(true),
        Written::Gone => Ok(false),
        Written::Conflict => Err(Halt::Conflict),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn status(up_to_date: Option<&str>) -> ResourcePoolStatus {
        let conditions: Vec<_> = up_to_date
            .map(|status| {
                json!({"type": HANDLES_UP_TO_DATE, "status": status, "reason": "R",
                       "message": "", "lastTransitionTime": "2026-11-27T10:00:00Z"})
            })
            .into_iter()
            .collect();
        serde_json::from_value(json!({"conditions": conditions})).expect("a pool status")
    }

    /// A short while, for the wakes' tests.
    const TICK: Duration = Duration::from_millis(200);

    fn pool_ref() -> ObjectRef<PoolObject> {
        let kind = kube::core::ApiResource::erase::<ResourcePool>(&());
        ObjectRef::<PoolObject>::new_with("p", kind).within("poolboy")
    }

    /// Wakes asked for within an interval wake the pool once, at the earliest instant asked
    /// for; then the next one waits its own.
    #[tokio::test]
    async fn later_wakes_wake_the_pool_once_at_the_earliest_instant() {
        let pool = pool_ref();
        let (wake, mut woken) = futures::channel::mpsc::unbounded();
        let wakes = LaterWakes::default();
        let started = Instant::now();
        // The first instant asked for is far enough away that a slow machine cannot reach it
        // before the earliest one: the wake that comes is the earliest's.
        let first_asked = started + TICK * 300;
        wakes.wake_at(pool.clone(), first_asked, &wake);
        wakes.wake_at(pool.clone(), started + TICK, &wake);
        wakes.wake_at(pool.clone(), started + TICK * 2, &wake);
        assert_eq!(wakes.due().len(), 1);
        assert!(woken.try_recv().is_err(), "nothing yet");
        let (first, created) = woken.next().await.expect("a wake");
        assert!(first == pool && created.is_none());
        let elapsed = started.elapsed();
        assert!(
            elapsed >= TICK && started + elapsed < first_asked,
            "{elapsed:?}"
        );
        tokio::time::sleep(TICK * 2).await;
        assert!(wakes.due().is_empty() && woken.try_recv().is_err(), "once");
        wakes.wake_at(pool.clone(), Instant::now() + TICK, &wake);
        assert_eq!(wakes.due().len(), 1, "the next change waits again");
    }

    /// A pass that begins before the instant reads the changes: no wake follows.
    #[tokio::test]
    async fn a_pass_that_begins_meanwhile_serves_the_wake() {
        let pool = pool_ref();
        let (wake, mut woken) = futures::channel::mpsc::unbounded();
        let wakes = LaterWakes::default();
        wakes.wake_at(pool.clone(), Instant::now() + TICK, &wake);
        wakes.served(&pool);
        tokio::time::sleep(TICK * 2).await;
        assert!(woken.try_recv().is_err(), "no wake");
        // A change after the pass began has its own wake.
        wakes.wake_at(pool.clone(), Instant::now() + TICK, &wake);
        let (again, _) = woken.next().await.expect("a wake");
        assert!(again == pool);
    }

    /// A pool's patience lets so many binds wait until its status may be written, and no more;
    /// a pass that begins ends it, and so does the instant.
    #[test]
    fn a_bind_waits_while_the_pool_is_patient() {
        let meta = ObjectMeta {
            name: Some("p".into()),
            uid: Some("u1".into()),
            ..ObjectMeta::default()
        };
        let memories = Memories::default();
        assert_eq!(memories.bind_may_wait(&meta), None, "no pass yet");
        let until = Instant::now() + COUNTS_INTERVAL;
        let patient = |binds| {
            memories
                .lock()
                .entry(memory_key(&meta))
                .or_default()
                .patience = Some(Patience { until, binds });
        };
        patient(2);
        assert_eq!(memories.bind_may_wait(&meta), Some(until));
        assert_eq!(memories.bind_may_wait(&meta), Some(until));
        assert_eq!(
            memories.bind_may_wait(&meta),
            None,
            "the third bind refills now"
        );
        patient(2);
        memories.pass_begins(&meta);
        assert_eq!(memories.bind_may_wait(&meta), None, "in a pass");
        let past = Instant::now() - Duration::from_millis(1);
        memories
            .lock()
            .entry(memory_key(&meta))
            .or_default()
            .patience = Some(Patience {
            until: past,
            binds: 2,
        });
        assert_eq!(
            memories.bind_may_wait(&meta),
            None,
            "the status may be written now"
        );
    }

    /// A name this process reserved counts as reserved until the store shows the handle,
    /// whatever the pool store's copy of the status says.
    #[test]
    fn a_name_reserved_here_is_pending_until_the_store_shows_it() {
        let meta = ObjectMeta {
            name: Some("p".into()),
            uid: Some("u1".into()),
            ..ObjectMeta::default()
        };
        let memories = Memories::default();
        assert!(!memories.is_pending(&meta, "guid-a"));
        let now = Utc::now();
        memories
            .lock()
            .entry(memory_key(&meta))
            .or_default()
            .pending
            .expect("guid-a", now);
        assert!(memories.is_pending(&meta, "guid-a"));
        assert!(!memories.is_pending(&meta, "guid-b"));
        let recreated = ObjectMeta {
            uid: Some("u2".into()),
            ..meta.clone()
        };
        assert!(
            !memories.is_pending(&recreated, "guid-a"),
            "another pool of that name"
        );
        if let Some(memory) = memories.lock().get_mut(&memory_key(&meta)) {
            memory.pending.observe(|name| name == "guid-a", [], now);
        }
        assert!(!memories.is_pending(&meta, "guid-a"), "shown");
    }

    /// A pool found gone takes its memory with it; the pools still stored keep theirs, and
    /// a pool created again under a gone one's name is another.
    #[test]
    fn a_pool_found_gone_is_forgotten() {
        let pool = |uid: &str| {
            let pool = json!({
                "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourcePool",
                "metadata": {"name": "p", "namespace": "poolboy", "uid": uid},
                "spec": {"resources": []},
            });
            Arc::new(serde_json::from_value::<PoolObject>(pool).expect("a pool"))
        };
        let memories = Memories::default();
        for uid in ["gone", "kept"] {
            memories
                .lock()
                .entry(uid.to_owned())
                .or_default()
                .status_written = Some(Instant::now());
        }
        memories.keep_only(&[pool("kept"), pool("new")]);
        let mut remembered: Vec<String> = memories.lock().keys().cloned().collect();
        remembered.sort();
        assert_eq!(remembered, ["kept"]);
    }

    #[test]
    fn a_refresh_is_announced_when_it_starts_and_when_it_ends() {
        let (reason, note) =
            refresh_news(Some(&status(Some("True"))), &status(Some("False")), 3).expect("news");
        assert_eq!(reason, "RefreshingHandles");
        assert!(note.starts_with("3 unbound handles"), "{note}");
        let done = refresh_news(Some(&status(Some("False"))), &status(Some("True")), 0);
        assert_eq!(done.map(|(reason, _)| reason), Some("RefreshedHandles"));
    }

    /// A pool seen for the first time, or one that had nothing to refresh, says nothing.
    #[test]
    fn a_pool_without_a_refresh_says_nothing() {
        assert_eq!(refresh_news(None, &status(Some("True")), 0), None);
        assert_eq!(
            refresh_news(Some(&status(None)), &status(Some("True")), 0),
            None
        );
        let steady = refresh_news(Some(&status(Some("True"))), &status(Some("True")), 0);
        assert_eq!(steady, None);
    }
}

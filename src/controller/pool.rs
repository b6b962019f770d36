//! The ResourcePool controller (§11, Δ§3.3): keeps `minAvailable` unbound handles, at most
//! `maxUnready` of them unready, deletes unhealthy unbound handles when asked, consumes active
//! scalings, and deletes the unbound handles when the pool goes. Exact across processes: every
//! create follows a guarded pool status write that reserves its name, and a scaling's count is
//! raised (guarded) before its handles are made (docs/design.md, "controller::pool").

mod finalize;
mod memory;
mod scalings;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use serde_json::json;

use self::finalize::{delete_unbound, finalize};
use self::memory::{LaterWakes, Memories, Patience, PoolMemory, memory_key};
use self::scalings::{consumed_scaling, release_scaling_handles, reserve_for_scaling};
use super::context::{Context, EventKind};
use super::reconciler::{self, Drive, Lifecycle};
use super::write::{self, Halt, OrHalt, PassError, Target, Written};
use crate::api::kinds::{HandleObject, Kinds, PoolObject};
use crate::api::pool::ResourcePoolStatus;
use crate::api::{ResourceHandle, ResourcePool, ResourcePoolScaling};
use crate::core::conditions::{Change, became_true, find};
use crate::core::handle::new::handle_for_pool;
use crate::core::lifespan::delay_until;
use crate::core::pool::autoscale::{self, AutoscaleDecision, AutoscaleError, BindHistory};
use crate::core::pool::plan::{
    BoundCounts, PendingHandles, PoolInput, PoolPlan, new_handle_names, plan_pool,
    set_pool_validity,
};
use crate::core::pool::refresh::{
    HANDLES_UP_TO_DATE, handle_version, pool_version, provider_specs, set_refresh_condition, stamp,
};
use crate::core::pool::scaling::remaining;
use crate::metrics::{PoolCounts, PoolLabels};
use crate::shutdown::Shutdown;
use crate::store::free_handles::FreeHandles;
use crate::store::health::WatchHealth;
use crate::store::pool_index::PoolIndex;
use crate::store::shared_watch::SharedWatch;

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
/// what the pool counts (an unbound handle's readiness or health except its turning unhealthy, a
/// claimed handle's readiness or deletion), and a bind whose refill may wait
/// ([`PoolMemory::patience`]).
pub(crate) fn controller(
    client: &Client,
    kinds: &Kinds,
    operator_namespace: &str,
    (handles, free): (&mut SharedWatch<HandleObject>, FreeHandles),
    health: &WatchHealth,
) -> PoolController {
    let main = Api::<PoolObject>::namespaced_with(client.clone(), operator_namespace, &kinds.pool);
    let config = crate::store::shared_watch::watch_config();
    let (controller, _) =
        reconciler::forgetting_controller(main, config, kinds.pool.clone(), health);
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

/// What pool reconciles share: the operator context (whose stores hold the index of each
/// pool's handles), and what this process remembers of each pool.
struct PoolContext {
    ctx: Arc<Context>,
    memory: Memories,
    later_wakes: LaterWakes,
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

    /// A deleted pool (its delete event, or the re-list that no longer brings it, wakes it
    /// here whichever process ran its finalizer): what this process remembers of it goes, and
    /// so do its gauges, which would go on showing a pool that is no more.
    fn gone(&self, namespace: Option<&str>, name: &str) {
        self.memory.keep_only(&self.ctx.stores.pools.state());
        self.ctx.metrics.forget_pool(&PoolLabels {
            name: name.to_owned(),
            namespace: namespace.unwrap_or_default().to_owned(),
        });
    }

    /// Counting from a store that has not listed yet would overfill the pool: the handles'
    /// or the scalings' (a scaling's handles fill the pool's minAvailable too, Δ§3.3 step 5).
    async fn prepare(&self) {
        self.handles().wait_until_listed().await;
        self.ctx.stores.scalings.wait_until_listed().await;
    }

    async fn finalize(&self, pool: &PoolObject, _: &mut ()) -> Result<Action, Halt<PoolError>> {
        finalize(pool, self).await
    }

    async fn pass(&self, pool: PoolObject, _: &mut ()) -> Result<Action, Halt<PoolError>> {
        self.memory.pass_begins(&pool.metadata);
        let key = ObjectRef::new_with(&pool.name_any(), self.ctx.kinds.pool.clone());
        self.later_wakes
            .served(&key.within(&pool.namespace().unwrap_or_default()));
        let api = self.ctx.pools_api();
        let pool = write::ensure_poolboy_finalizer(&api, pool, self.ctx.domain())
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

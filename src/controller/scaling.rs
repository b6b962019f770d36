//! The ResourcePoolScaling controller (Δ§2.1 `manage()`): ties each scaling to its pool (the
//! pool as controlling owner, so deleting the pool garbage-collects its scalings), keeps
//! `status.state` current, and wakes the pool when the scaling is or becomes active. The pool
//! controller consumes active scalings (Δ§3.3); this controller never creates handles.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use kube::api::{Api, PartialObjectMeta, Patch};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::context::{Context, EventKind};
use super::reconciler::{self, Drive, Lifecycle};
use super::write::{self, Halt, OrHalt, PassError, Target};
use crate::api::ResourcePoolScaling;
use crate::api::kinds::{Kinds, PoolObject, ScalingObject};
use crate::core::conditions::Change;
use crate::core::json::pointer::{add, test};
use crate::core::lifespan::delay_until;
use crate::core::pool::scaling::{
    desired_state, is_active, next_deadline, owner_references, state_patch, validity_conditions,
};
use crate::shutdown::Shutdown;
use crate::store::health::WatchHealth;
use crate::store::shared_watch::ListedStore;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ScalingControllerError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// The controller, watching the scalings of the operator namespace, and its pools: a pool
/// that appears (or is created again) wakes the scalings that name it, so a scaling waiting
/// for its pool goes on at once. Its store, and whether it has listed, is the index of
/// scalings the pool controller reads (`Context::stores`).
pub(crate) fn controller(
    client: &Client,
    kinds: &Kinds,
    operator_namespace: &str,
    health: &WatchHealth,
) -> (Controller<ScalingObject>, ListedStore<ScalingObject>) {
    let main =
        Api::<ScalingObject>::namespaced_with(client.clone(), operator_namespace, &kinds.scaling);
    let pools = Api::<PartialObjectMeta<PoolObject>>::namespaced_with(
        client.clone(),
        operator_namespace,
        &kinds.pool,
    );
    let config = crate::store::shared_watch::watch_config();
    // A scaling holds no finalizer: its watch's delete event is where it is last seen.
    let (controller, listed) =
        reconciler::forgetting_controller(main, config.clone(), kinds.scaling.clone(), health);
    let scalings = controller.store();
    let scaling_kind = kinds.scaling.clone();
    // Only a pool's appearance matters here (the predicate cache is keyed by uid): its spec
    // and status changes would wake every scaling for nothing. So this watch asks for the
    // metadata alone: each write of a pool's status (one a bind) reaches it without the spec
    // and status, and is not decoded as a pool.
    // A name of its own beside the pool controller's watch of the same pools: under one, each
    // would mark the other working at its events while it still failed. (An accepted watch of
    // the pools marks both working: they send the same request, `store::health`.)
    let appeared = health
        .watch(format!("{} (for scalings)", kinds.pool.kind), pools, config)
        .touched_objects()
        .predicate_filter(
            |_: &PartialObjectMeta<PoolObject>| Some(0),
            Default::default(),
        );
    let controller = controller.watches_stream_with(
        appeared,
        move |pool: PartialObjectMeta<PoolObject>| {
            let name = pool.name_any();
            let namespace = pool.namespace();
            scalings
                .state()
                .into_iter()
                .filter(|s| s.spec.resource_pool.name == name && s.namespace() == namespace)
                .map(|s| ObjectRef::from_obj_with(s.as_ref(), scaling_kind.clone()))
                .collect::<Vec<_>>()
        },
        kinds.pool.clone(),
    );
    (controller, listed)
}

/// Runs `controller` until `shutdown`.
pub(crate) async fn run(
    controller: Controller<ScalingObject>,
    ctx: Arc<Context>,
    concurrency: u16,
    shutdown: Shutdown,
) {
    let drive = Drive {
        triggers: None,
        backlog: None,
        concurrency,
        shutdown,
    };
    reconciler::run(controller, drive, Arc::new(ScalingContext(ctx))).await;
}

/// What scaling reconciles share: the operator context.
struct ScalingContext(Arc<Context>);

impl Lifecycle for ScalingContext {
    const KIND: &'static str = "ResourcePoolScaling";
    type Stored = ScalingObject;
    type Object = ScalingObject;
    type Error = ScalingControllerError;
    type Carry = ();

    fn context(&self) -> &Context {
        &self.0
    }

    fn unpack(stored: &ScalingObject) -> Result<ScalingObject, ScalingControllerError> {
        Ok(stored.clone())
    }

    /// A scaling holds no finalizer: nothing to release.
    async fn finalize(
        &self,
        _: &ScalingObject,
        _: &mut (),
    ) -> Result<Action, Halt<ScalingControllerError>> {
        Ok(Action::await_change())
    }

    async fn pass(
        &self,
        scaling: ScalingObject,
        _: &mut (),
    ) -> Result<Action, Halt<ScalingControllerError>> {
        manage(&scaling, &self.0).await
    }

    async fn reread(
        &self,
        _: Option<&str>,
        name: &str,
    ) -> Result<Option<ScalingObject>, ScalingControllerError> {
        Ok(self.0.scalings_api().get_opt(name).await?)
    }
}

impl PassError for ScalingControllerError {}

async fn manage(
    object: &ScalingObject,
    ctx: &Context,
) -> Result<Action, Halt<ScalingControllerError>> {
    let scaling = Kinds::scaling_of(object);
    let domain = ctx.domain();
    let name = scaling.name_any();
    let api = ctx.scalings_api();

    // Δ§2.1 step 1: the pool from the store, else from the API (B16: by spec.resourcePool.name).
    let pool_name = scaling.spec.resource_pool.name.clone();
    let pool_ref = ObjectRef::new_with(&pool_name, ctx.kinds.pool.clone())
        .within(&scaling.namespace().unwrap_or_default());
    let pool = match ctx.stores.pools.get(&pool_ref) {
        Some(pool) => Some(pool.as_ref().clone()),
        None => ctx.pools_api().get_opt(&pool_name).await?,
    };
    let Some(pool) = pool else {
        let problem = format!(
            "spec.resourcePool.name: ResourcePool {pool_name} does not exist in namespace {}; \
             create it or correct the name",
            scaling.namespace().unwrap_or_default()
        );
        report(ctx, object, &scaling, Some(problem), ctx.now()).await?;
        // The pool watch wakes this scaling when the pool appears.
        return Ok(Action::await_change());
    };

    // Δ§2.1 step 2: the pool owns the scaling.
    let derived_pool = Kinds::pool_of(&pool);
    let current = scaling.metadata.owner_references.clone();
    if let Some(wanted) = owner_references(
        current.as_deref().unwrap_or_default(),
        &derived_pool,
        &ctx.kinds.pool.api_version,
    ) {
        let path = ["metadata", "ownerReferences"];
        let ops = vec![
            test(&path, current.map_or(Value::Null, |c| json!(c))),
            add(&path, json!(wanted)),
        ];
        let patch = Patch::Json::<()>(json_patch::Patch(ops));
        write::send(&api, &name, Target::Object, &patch)
            .await
            .or_halt()?;
    }

    let now = ctx.now();
    let state = match desired_state(&scaling, now) {
        Ok(state) => state,
        Err(error) => {
            report(ctx, object, &scaling, Some(error.to_string()), now).await?;
            return Ok(Action::await_change());
        }
    };
    report(ctx, object, &scaling, None, now).await?;

    // Q7 fixed: the state follows the counts; written only when it differs, guarded by the
    // count it was computed from.
    if scaling.status.as_ref().and_then(|s| s.state) != Some(state) {
        let patch = Patch::Json::<()>(state_patch(&scaling, state));
        write::send(&api, &name, Target::Status, &patch)
            .await
            .or_halt()?;
    }

    if is_active(&scaling, domain, now) == Ok(true) && pool.metadata.deletion_timestamp.is_none() {
        ctx.triggers.wake_pool(&pool, &ctx.kinds);
    }
    Ok(match next_deadline(&scaling, now).ok().flatten() {
        // At `at` the scaling becomes active: show `scaling` and wake the pool then.
        Some(at) => Action::requeue(delay_until(at, now)),
        None => Action::await_change(),
    })
}

/// Writes the `Valid` condition for `problem` when it changed
/// ([`crate::core::pool::scaling::validity_conditions`]), with a Warning Event and the invalid
/// resources metric for a new problem.
async fn report(
    ctx: &Context,
    object: &ScalingObject,
    scaling: &ResourcePoolScaling,
    problem: Option<String>,
    now: DateTime<Utc>,
) -> Result<(), Halt<ScalingControllerError>> {
    let (conditions, change) = validity_conditions(scaling, problem.as_deref(), now);
    if change == Change::Unchanged {
        return Ok(());
    }
    // A merge patch leaves count and state alone; guarded by the version the conditions were
    // computed from.
    let patch = json!({"status": {"conditions": conditions}});
    write::merge(&ctx.scalings_api(), object, Target::Status, &patch)
        .await
        .or_halt()?;
    if change.is_news()
        && let Some(problem) = problem
    {
        tracing::warn!(scaling = %scaling.name_any(), %problem, "invalid ResourcePoolScaling");
        ctx.metrics.invalid("ResourcePoolScaling");
        ctx.event(
            object,
            &ctx.kinds.scaling,
            EventKind::Warning,
            "InvalidResourcePoolScaling",
            problem,
        )
        .await;
    }
    Ok(())
}

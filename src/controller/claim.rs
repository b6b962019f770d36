//! The ResourceClaim controller (§6, §7, Δ§3.1, Δ§3.2). A pass resolves what the claim is
//! (`core::claim::resolve`), binds or creates its handle (`binding`), writes its status from the
//! handle (`core::claim::status`) and carries claim edits to the handle; it is the only writer
//! of claim status. A handle bound before a conflicting write is carried into the next pass,
//! so that it is recorded or released, never lost; a pool handle's bind is recorded after the
//! handle's pass that carries the claim to its resources (`unrecorded`), in one status write.

mod announce;
mod binding;
mod fair_queue;
mod limits;
mod unrecorded;
mod wait;
mod writes;

use std::ops::{ControlFlow, Deref};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender};
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;

use self::announce::{
    announce_lifespan_change, announce_milestones, warn_invalid, warn_lifespan_ending,
};
use self::binding::{Outcome, Pending};
use self::unrecorded::{News, UnrecordedBinds, awaits_resources};
use super::backlog::Backlog;
use super::backlogged::Backlogged;
use super::context::{Context, EventKind};
use super::managed::{self, InStore};
use super::reconciler::{self, Drive, Lifecycle};
use super::write::{self, Halt, OrHalt, PassError, Written};
use crate::api::claim::ClaimStatusLifespan;
use crate::api::kinds::{ClaimObject, HandleObject, Kinds, PoolObject};
use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle};
use crate::core::claim::gates::{
    AutoAction, AutoInput, auto_action, claim_metadata_patch, provider_while_waiting,
};
use crate::core::claim::resolve::{ResolveInput, ResolvedClaim, resolve_claim};
use crate::core::claim::status::{
    Binding, BoundHandle, StatusInput, Unbound, Validity, invalid_message, lifespan_event,
};
use crate::core::conditions;
use crate::core::handle::definition::status_references;
use crate::core::lifespan::values::handle_lifespan;
use crate::core::lifespan::{self, Expiry, StartGate, warnings};
use crate::core::template::TemplateEngine;
use crate::core::template::view::Subjects;
use crate::shutdown::Shutdown;
use crate::store::claim_readers::ClaimReaders;
use crate::store::claim_summaries::ClaimSummaries;
use crate::store::free_handles::FreeHandles;
use crate::store::health::WatchHealth;
use crate::store::packed::{StoredClaim, StoredHandle};
use crate::store::shared_watch::{ListedStore, SharedWatch};

pub(crate) use crate::store::claim_index::ClaimIndex;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ClaimError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("cannot match handles: {0}")]
    Match(#[from] crate::core::binding::matching::MatchError),
    /// Retried with backoff: the object may shrink, or the API server's limit grow.
    #[error("the status is too large to write: {0}")]
    StatusTooLarge(#[source] kube::Error),
    /// Retried with backoff: the API server makes another name.
    #[error("the generated name of a new handle was taken")]
    NameTaken,
    #[error("cannot decode the claim its store keeps: {0}")]
    Unpack(#[from] crate::store::packed::UnpackError),
}

impl PassError for ClaimError {}

/// The claim controller, with the index of handles its reconciles read and the summaries of
/// claims every controller reads.
pub(crate) struct ClaimController {
    controller: Controller<StoredClaim>,
    listed: ListedStore<StoredClaim>,
    backlog: Backlog<StoredClaim>,
    index: ClaimIndex,
    summaries: ClaimSummaries,
    unrecorded: Arc<UnrecordedBinds>,
}

impl ClaimController {
    /// The store of claims, the one every controller reads (`Context::stores`), and whether
    /// their watch has listed them once.
    pub(crate) fn store(&self) -> ListedStore<StoredClaim> {
        self.listed.clone()
    }

    pub(crate) fn summaries(&self) -> ClaimSummaries {
        self.summaries.clone()
    }

    pub(crate) fn index(&self) -> ClaimIndex {
        self.index.clone()
    }
}

/// The broker's one watch of claims (in `claim_namespace`, or all namespaces), for
/// [`controller`] to drive; the write layer's memory follows its deletions.
pub(crate) fn watch(
    client: &Client,
    kinds: &Kinds,
    claim_namespace: Option<&str>,
    health: &WatchHealth,
) -> SharedWatch<ClaimObject> {
    let main = match claim_namespace {
        Some(ns) => Api::<ClaimObject>::namespaced_with(client.clone(), ns, &kinds.claim),
        None => Api::<ClaimObject>::all_with(client.clone(), &kinds.claim),
    };
    let config = crate::store::shared_watch::watch_config();
    let mut claims = SharedWatch::new(main, config, kinds.stored_claim.clone(), health);
    claims.follow_deletes(write::forget_replaced);
    claims
}

/// The controller, driving the claim watch (`claims`, from [`watch`]), and following
/// the broker's handle watch: a handle change wakes its claim, and an unbound handle wakes the
/// claims waiting for one. Its store is the index of claims every controller reads
/// (`Context::stores`), beside [`ClaimSummaries`]; its [`ClaimIndex`] indexes the handles.
///
/// The claim watch is the handle controller's too: a claim change that a handle reads
/// (`ClaimSummaries::following`: not what the claim's status copies from its handle) wakes,
/// through `wake_handles`, the handle its status names and every handle bound to it (one a
/// process bound and died before recording must hear that its claim went), once the store
/// has the change; a change of only the claim's spec, status or deletion, only those of them
/// that render it (`ClaimReaders`). So a handle reads its claim from the store rather than
/// with a GET, and claims are watched once.
pub(crate) fn controller(
    mut claims: SharedWatch<ClaimObject>,
    kinds: &Kinds,
    operator_namespace: &str,
    (handles, free): (&mut SharedWatch<HandleObject>, FreeHandles),
    (wake_handles, readers): (UnboundedSender<ObjectRef<StoredHandle>>, ClaimReaders),
    concurrency: u16,
    backlogged: &Backlogged,
) -> ClaimController {
    // The store is written before the wake goes out: a woken claim reads the change.
    let (index, handle_events) = ClaimIndex::following(handles, free);
    let bindings = index.clone();
    let handle_kind = kinds.stored_handle.clone();
    let handle_namespace = operator_namespace.to_owned();
    index.follow_claims(&mut claims);
    let summaries = ClaimSummaries::following(&mut claims, move |claim, only_rendered| {
        for name in handles_of_claim(claim, &bindings) {
            if only_rendered && !readers.renders_claim(&name) {
                continue;
            }
            let handle = ObjectRef::new_with(&name, handle_kind.clone()).within(&handle_namespace);
            // Closed only when the operator stops.
            let _ = wake_handles.unbounded_send(handle);
        }
    });
    let claim_kind = kinds.stored_claim.clone();
    let waiting = index.clone();
    let unrecorded = Arc::new(UnrecordedBinds::default());
    let awaiting = unrecorded.clone();
    let (backlog, released) =
        Backlog::new(kinds.stored_claim.clone(), concurrency, backlogged.clone());
    // A wake from a parked bind's resources is what its record waits for.
    let backlog = backlog.hearing_news(move |claim| {
        awaiting.is_parked(claim.namespace.as_deref().unwrap_or_default(), &claim.name)
    });
    let admit = backlog.clone();
    let parked = unrecorded.clone();
    let wakes = move |handle: HandleObject| -> Vec<ObjectRef<StoredClaim>> {
        let claim_ref = |namespace: &str, name: &str| {
            ObjectRef::new_with(name, claim_kind.clone()).within(namespace)
        };
        let wakes: Vec<_> = match &handle.spec.resource_claim {
            Some(claim) => vec![claim_ref(&claim.namespace, &claim.name)],
            None if handle.metadata.deletion_timestamp.is_none() => waiting
                .waiting()
                .iter()
                .map(|(namespace, name)| claim_ref(namespace, name))
                .collect(),
            None => Vec::new(),
        };
        // A change that concerns a bind being made or parked is that claim's news, not
        // routine; the bind's own echo, or its parked handle's change, no news at all.
        wakes
            .into_iter()
            .filter(|claim| {
                let namespace = claim.namespace.as_deref().unwrap_or_default();
                match parked.news_of(namespace, &claim.name, &handle) {
                    News::Routine => admit.admit(claim),
                    News::Awaited => admit.admit_news(claim),
                    News::None => false,
                }
            })
            .collect()
    };
    let listed = claims.store();
    let store = listed.store().clone();
    let own = backlog.objects(claims.into_stream());
    let controller = Controller::for_stream_with(own, store, kinds.stored_claim.clone())
        .watches_stream_with(handle_events, wakes, kinds.handle.clone())
        .reconcile_on(released);
    ClaimController {
        controller,
        listed,
        backlog,
        index,
        summaries,
        unrecorded,
    }
}

/// The handles a change of `claim` concerns: the one its status names, and every handle bound
/// to it.
fn handles_of_claim(claim: &ClaimObject, bindings: &ClaimIndex) -> Vec<String> {
    let (namespace, name) = namespace_and_name(claim);
    let mut handles = bindings.bound_to(namespace, name);
    let recorded = claim
        .status
        .as_ref()
        .and_then(|s| s.resource_handle.as_ref())
        .map(|h| h.name.clone());
    handles.extend(recorded.filter(|name| !handles.contains(name)));
    handles
}

/// What claim reconciles share: the operator context and this controller's [`ClaimIndex`].
pub(crate) struct ClaimContext {
    ctx: Arc<Context>,
    index: ClaimIndex,
    unrecorded: Arc<UnrecordedBinds>,
}

impl ClaimContext {
    /// The pool called `name` in the operator namespace, as the pool store has it.
    fn stored_pool(&self, name: &str) -> Option<Arc<PoolObject>> {
        let namespace = &self.config.operator_namespace;
        let key = ObjectRef::new_with(name, self.kinds.pool.clone()).within(namespace);
        self.stores.pools.get(&key)
    }

    /// The handle called `name` in the operator namespace, where handles live, as the claim
    /// index has it (its free copy, else the store's).
    fn stored_handle(&self, name: &str) -> Option<Arc<HandleObject>> {
        let namespace = &self.config.operator_namespace;
        self.index
            .handle(namespace, name, &self.kinds.stored_handle)
    }
}

impl Deref for ClaimContext {
    type Target = Context;

    fn deref(&self) -> &Context {
        &self.ctx
    }
}

/// Runs `controller` until `shutdown`; `triggers` wake it from outside its watches.
pub(crate) async fn run(
    controller: ClaimController,
    ctx: Arc<Context>,
    triggers: UnboundedReceiver<ObjectRef<StoredClaim>>,
    concurrency: u16,
    shutdown: Shutdown,
) {
    let ClaimController {
        controller,
        backlog,
        index,
        unrecorded,
        ..
    } = controller;
    let drive = Drive {
        triggers: Some(triggers),
        backlog: Some(backlog),
        concurrency,
        shutdown,
    };
    let claims = ClaimContext {
        ctx,
        index,
        unrecorded,
    };
    reconciler::run(controller, drive, Arc::new(claims)).await;
}

impl Lifecycle for ClaimContext {
    const KIND: &'static str = "ResourceClaim";
    type Stored = StoredClaim;
    type Object = ClaimObject;
    type Error = ClaimError;
    /// A handle a pass bound before a conflicting write, until a pass records it.
    type Carry = Option<Pending>;

    fn context(&self) -> &Context {
        &self.ctx
    }

    fn unpack(stored: &StoredClaim) -> Result<ClaimObject, ClaimError> {
        Ok(stored.unpack()?)
    }

    /// Binding decisions need every handle listed once: a claim must not create a handle
    /// because the list had not arrived yet.
    async fn prepare(&self) {
        self.index.wait_until_listed().await;
    }

    async fn finalize(
        &self,
        claim: &ClaimObject,
        pending: &mut Option<Pending>,
    ) -> Result<Action, Halt<ClaimError>> {
        let pending = pending.take().or_else(|| parked(self, claim));
        finalize(self, claim, pending).await
    }

    fn gone(&self, namespace: Option<&str>, name: &str) {
        let namespace = namespace.unwrap_or_default();
        self.index.forget_claim(namespace, name);
        self.unrecorded.forget(namespace, name);
    }

    async fn pass(
        &self,
        claim: ClaimObject,
        pending: &mut Option<Pending>,
    ) -> Result<Action, Halt<ClaimError>> {
        pass(self, claim, pending).await
    }

    async fn reread(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<ClaimObject>, ClaimError> {
        let api = self.claims_api(namespace.unwrap_or_default());
        Ok(api.get_opt(name).await?)
    }
}

/// The bind an earlier reconcile of `claim` parked until its handle's pass.
fn parked(ctx: &ClaimContext, claim: &ClaimObject) -> Option<Pending> {
    let (namespace, name) = namespace_and_name(claim);
    let uid = claim.metadata.uid.as_deref().unwrap_or_default();
    ctx.unrecorded.take(namespace, name, uid)
}

/// The claim's namespace and name, as the claim index keys waiting claims.
pub(crate) fn namespace_and_name(claim: &ClaimObject) -> (&str, &str) {
    (
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// §7.3: the handle goes with the claim (unless detached); then every Poolboy finalizer.
/// `pending` is a handle this reconcile bound whose record in the status the deletion beat
/// (the status write conflicted with it): it goes too, though the handle watch may not show
/// its bind yet.
async fn finalize(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    pending: Option<Pending>,
) -> Result<Action, Halt<ClaimError>> {
    let (namespace, name) = namespace_and_name(claim);
    ctx.index.stop_waiting(namespace, name);
    // A claim held back by a provider's limit may take this one's place.
    limits::wake_waiting(ctx, namespace);
    let handle = claim
        .status
        .as_ref()
        .and_then(|s| s.resource_handle.as_ref());
    if let Some(handle) = handle.filter(|h| h.detached != Some(true)) {
        // Where handles live, as `binding::find_handle` reads it.
        let api = ctx.handles_api();
        // Being deleted now (its finalizer runs): it says why.
        if let Written::Done(Some(deleted)) = write::delete_named(&api, &handle.name).await? {
            if let Some(uid) = &deleted.metadata.uid {
                ctx.stores.deleted_by_claims.record(uid);
            }
            ctx.metrics.handle_deleted("claim_deleted");
            let note = format!(
                "ResourceClaim {namespace}/{name} was deleted: deleting the handle and its resources"
            );
            let kind = &ctx.kinds.handle;
            ctx.event(&deleted, kind, EventKind::Normal, "ClaimDeleted", note)
                .await;
        }
    }
    let recorded = handle.map(|h| h.name.as_str());
    binding::delete_strays(ctx, claim, recorded, pending.map(|bound| bound.handle)).await?;
    writes::remove_finalizers(ctx, claim).await.or_halt()?;
    Ok(Action::await_change())
}

/// Whether a claim's finalizer waits for the write of its initialisation (§6.3): a claim seen
/// for the first time, and started, gets it there, a write and a reconcile fewer per claim.
fn defers_finalizer(
    claim: &ClaimObject,
    gate: &Result<StartGate, lifespan::LifespanError>,
    domain: &OperatorDomain,
) -> bool {
    claim.status.is_none()
        && matches!(gate, Ok(StartGate::Open))
        && !domain.carries_poolboy_finalizer(&claim.metadata)
}

/// One pass of §7 over a claim that is not being deleted.
async fn pass(
    ctx: &ClaimContext,
    claim: ClaimObject,
    pending: &mut Option<Pending>,
) -> Result<Action, Halt<ClaimError>> {
    let now = ctx.now();
    if pending.is_none() {
        *pending = parked(ctx, &claim);
    }
    // Δ§3.1.1, B19: nothing at all happens before the claim's start (but the finalizer).
    let gate = lifespan::start_gate(&Kinds::claim_of(&claim), now);
    let defer = defers_finalizer(&claim, &gate, ctx.domain());
    let claim = match defer {
        true => claim,
        false => writes::ensure_finalizer(ctx, claim).await.or_halt()?,
    };
    match gate {
        Ok(StartGate::OpensAt(start)) => {
            return Ok(Action::requeue(lifespan::delay_until(start, now)));
        }
        Ok(StartGate::Open) => {}
        Err(e) => return report_invalid(ctx, claim, None, None, e.to_string()).await,
    }
    let handle = match recorded_handle(ctx, &claim, pending, now).await? {
        ControlFlow::Continue(handle) => handle,
        ControlFlow::Break(action) => return Ok(action),
    };
    // What this pass's templates make of the clock decides when it runs again.
    let templates = ctx.templates.watching();
    let resolved = resolve(ctx, claim, handle.as_ref(), &templates, defer, now).await?;
    let (claim, resolved) = match resolved {
        ControlFlow::Continue(resolved) => resolved,
        ControlFlow::Break(action) => return Ok(action),
    };
    // §7 step 6: an invalid claim neither binds nor changes its handle.
    if !resolved.is_valid() {
        let message = resolved.problem_message();
        let action = report_invalid(ctx, claim, handle.as_ref(), Some(&resolved), message).await?;
        // A check comparing a time with now may pass later without any change.
        return Ok(wake_with_the_clock(ctx, &templates, now, action, None));
    }
    let claim = match approval(ctx, claim, &resolved).await? {
        ControlFlow::Continue(claim) => claim,
        ControlFlow::Break(action) => return Ok(action),
    };
    match handle {
        Some(handle) => sync_bound(ctx, &templates, claim, &resolved, handle, None).await,
        None => bind(ctx, &templates, claim, &resolved, pending, now).await,
    }
}

/// The handle the claim's status records, once a handle an earlier pass of this reconcile
/// bound is settled: recorded by now, or lost to another process that recorded a different
/// one. `Break` when the pass ends here: the claim is detached (§7 step 2), or its handle is
/// gone, and the claim with it (§7 step 5; never bind anew, §16).
async fn recorded_handle(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    pending: &mut Option<Pending>,
    now: DateTime<Utc>,
) -> Result<ControlFlow<Action, Option<HandleObject>>, Halt<ClaimError>> {
    let recorded = claim
        .status
        .as_ref()
        .and_then(|s| s.resource_handle.clone());
    if let Some(recorded) = recorded.as_ref().filter(|h| h.detached == Some(true)) {
        return detached(ctx, claim, recorded, now)
            .await
            .map(ControlFlow::Break);
    }
    if let (Some(bound), Some(recorded)) = (pending.as_ref(), recorded.as_ref()) {
        if bound.name() != recorded.name {
            binding::release(ctx, claim, &bound.handle).await?;
        }
        *pending = None;
    }
    let Some(reference) = recorded else {
        return Ok(ControlFlow::Continue(None));
    };
    let Some(handle) = binding::find_handle(ctx, &reference).await? else {
        tracing::info!(claim = %binding::claim_key(claim), handle = %reference.name,
            "the claim's handle is gone: deleting the claim");
        writes::delete(ctx, claim).await?;
        return Ok(ControlFlow::Break(Action::await_change()));
    };
    binding::release_strays(ctx, claim, &reference.name).await?;
    Ok(ControlFlow::Continue(Some(handle)))
}

/// What the claim is (§6: its provider, parameters and validity), with its one-time
/// initialisation written (§6.3, with a deferred finalizer) and the provider's
/// resourceClaimAnnotations/Labels whenever they differ (§6.1). `Break` when the claim cannot
/// be resolved: the problem is in its status.
async fn resolve(
    ctx: &ClaimContext,
    claim: ClaimObject,
    handle: Option<&HandleObject>,
    templates: &TemplateEngine,
    defer_finalizer: bool,
    now: DateTime<Utc>,
) -> Result<ControlFlow<Action, (ClaimObject, ResolvedClaim)>, Halt<ClaimError>> {
    let finalizer = ctx.domain().finalizer();
    let handle_view = handle.map(Kinds::handle_of);
    let resolved = ctx.providers(|catalog| {
        resolve_claim(&ResolveInput {
            claim: &Kinds::claim_of(&claim),
            handle: handle_view.as_ref(),
            catalog,
            templates,
            domain: ctx.domain(),
            now,
        })
    });
    let resolved = match resolved {
        Ok(resolved) => resolved,
        Err(e) => {
            let claim = match defer_finalizer {
                true => writes::ensure_finalizer(ctx, claim).await.or_halt()?,
                false => claim,
            };
            let action = report_invalid(ctx, claim, handle, None, e.to_string()).await?;
            return Ok(ControlFlow::Break(action));
        }
    };
    let initialisation = match defer_finalizer {
        true => Some(writes::with_finalizer(
            resolved.initialisation.clone(),
            &claim,
            &finalizer,
        )),
        false => resolved.initialisation.clone(),
    };
    let mut claim = claim;
    if let Some(patch) = &initialisation {
        claim = writes::initialise(ctx, &claim, patch).await.or_halt()?;
    }
    let metadata = resolved.provider.as_ref().and_then(|provider| {
        let spec = provider.spec();
        claim_metadata_patch(
            &Kinds::claim_of(&claim),
            spec.resource_claim_annotations.as_ref(),
            spec.resource_claim_labels.as_ref(),
        )
    });
    if let Some(patch) = &metadata {
        claim = writes::initialise(ctx, &claim, patch).await.or_halt()?;
    }
    Ok(ControlFlow::Continue((claim, resolved)))
}

/// §6.1: nothing is provisioned before approval; a bound claim counts as approved. `Break`
/// while the claim waits for it, its status saying so (on first sight with `status.approval`
/// pending, and `status.provider` naming its provider, as Poolboy writes them; never its
/// resources), woken by the status change that approves it (the claim watch sees status).
async fn approval(
    ctx: &ClaimContext,
    claim: ClaimObject,
    resolved: &ResolvedClaim,
) -> Result<ControlFlow<Action, ClaimObject>, Halt<ClaimError>> {
    let gate = &resolved.approval;
    let (Some(provider), Some(unbound)) = (&resolved.provider, Unbound::awaiting_approval(gate))
    else {
        return Ok(ControlFlow::Continue(claim));
    };
    let (namespace, name) = namespace_and_name(&claim);
    ctx.index.stop_waiting(namespace, name);
    let status_provider = provider_while_waiting(claim.status.as_ref(), provider.name());
    let generation = claim.metadata.generation;
    write_unbound(ctx, claim, unbound, |binding| StatusInput {
        validity: Validity::Valid,
        provider: Some(&status_provider),
        resources: None,
        approval: gate.pending(),
        binding,
        generation,
        domain: ctx.domain(),
        now: ctx.now(),
        wait: None,
    })
    .await?;
    Ok(ControlFlow::Break(Action::await_change()))
}

/// §7 step 8: bind an unbound handle that fits, or create one, or wait.
async fn bind(
    ctx: &ClaimContext,
    templates: &TemplateEngine,
    claim: ClaimObject,
    resolved: &ResolvedClaim,
    pending: &mut Option<Pending>,
    now: DateTime<Utc>,
) -> Result<Action, Halt<ClaimError>> {
    let (namespace, name) = namespace_and_name(&claim);
    // Registered before looking, so that a handle appearing meanwhile still wakes the claim.
    ctx.index.wait(namespace, name);
    // The echo of the bind's patch is no news to the claim that makes it.
    let making = ctx.unrecorded.making(namespace, name);
    let outcome = match pending.take() {
        Some(bound) => Outcome::Bound(Box::new(bound)),
        None => binding::bind_or_create(ctx, &claim, resolved, now).await?,
    };
    let bound = match outcome {
        Outcome::Waiting(unbound) => return waiting(ctx, claim, resolved, unbound).await,
        Outcome::Invalid(message) => {
            return report_invalid(ctx, claim, None, Some(resolved), message).await;
        }
        Outcome::Bound(bound) => bound,
    };
    let (namespace, name) = namespace_and_name(&claim);
    ctx.index.stop_waiting(namespace, name);
    let mut bound = *bound;
    making.made(&bound.handle);
    let current = binding::latest_copy(ctx, &bound.handle, &claim);
    let states = live_states(ctx, &Kinds::handle_of(&current)).await;
    if let Some(left) = awaits_resources(&bound, &current, &states, (namespace, name), ctx.domain())
    {
        let uid = claim.metadata.uid.as_deref().unwrap_or_default();
        ctx.unrecorded.park(namespace, name, uid, bound);
        return Ok(Action::requeue(left));
    }
    bound.handle = current;
    let handle = bound.handle.clone();
    *pending = Some(bound);
    let action = sync_bound(ctx, templates, claim, resolved, handle, pending.as_ref()).await?;
    *pending = None;
    Ok(action)
}

/// The live state of each of the handle's resources, as their watches have them (§7.4):
/// None where a watch has none. A watch not started yet is started, and its first list
/// waited for, so that a claim passing before its handle (at a start) sees its resources.
async fn live_states(
    ctx: &ClaimContext,
    handle: &ResourceHandle,
) -> Vec<Option<serde_json::Value>> {
    let mut states = Vec::new();
    for reference in status_references(handle) {
        states.push(match reference {
            Some(reference) => match managed::watched_state(ctx, &reference).await {
                InStore::Found(state) => Some(state),
                InStore::Absent | InStore::Unknown => None,
            },
            None => None,
        });
    }
    states
}

/// A bound, valid claim: status from the handle (§7.4, Δ§3.1.3), the automatic actions, the
/// first-ready reset, then claim edits to the handle (§7 step 11). `bind` is the bind this
/// pass records: its clamped requested end, and why a handle was made for it. `templates` is
/// the pass's watching engine: the claim is looked at again when what its templates
/// (autoDelete, autoDetach, lifespan, validation) gave may change with the clock.
async fn sync_bound(
    ctx: &ClaimContext,
    templates: &TemplateEngine,
    claim: ClaimObject,
    resolved: &ResolvedClaim,
    handle: HandleObject,
    bind: Option<&Pending>,
) -> Result<Action, Halt<ClaimError>> {
    let now = ctx.now();
    let domain = ctx.domain();
    let view = Kinds::claim_of(&claim);
    let handle_view = Kinds::handle_of(&handle);
    let subjects = Subjects::new(Some(&resolved.claim), Some(&handle_view), domain);
    let bound_on = bind.map(|b| b.bound_on);
    let lifespan = handle_lifespan(&handle_view, &subjects, templates, now)
        .map_err(|e| e.to_string())
        .and_then(|evaluated| {
            lifespan::sync_claim_lifespan(&view, &handle_view, &evaluated, now, bound_on)
                .map_err(|e| e.to_string())
        });
    let sync = match lifespan {
        Ok(sync) => sync,
        Err(message) => {
            return report_invalid(ctx, claim, Some(&handle), Some(resolved), message).await;
        }
    };
    // §7 steps 9–10: a template error in a condition is bad input, and the condition false.
    let decide = |claim: &ResourceClaim| {
        auto_action(&AutoInput {
            claim,
            handle: &handle_view,
            provider: resolved.provider.as_ref().map(|p| p.resource()),
            templates,
            domain,
            now,
        })
    };
    let auto = decide(&view);
    let read_version = claim.metadata.resource_version.clone();
    let bound = Mirrored {
        resolved,
        handle: &handle_view,
        lifespan: &sync.status,
        errors: &auto.errors,
        created_because: bind.and_then(|b| b.created_because.as_deref()),
        now,
    };
    let (claim, next_crossing) = mirror_handle(ctx, claim, &bound).await?;
    if handle.metadata.deletion_timestamp.is_some() {
        // Going away, and the claim with it: nothing to propagate.
        return Ok(Action::await_change());
    }
    // The conditions read the claim's status, which the write above may just have changed (its
    // handle's summary, say); the write's echo wakes no pass, so they are decided again on the
    // claim as written. What they report as errors is the first decision's, in that status.
    let action = if claim.metadata.resource_version == read_version {
        auto.action
    } else {
        decide(&Kinds::claim_of(&claim)).action
    };
    if let ControlFlow::Break(action) = act_automatically(ctx, &claim, &handle, action).await? {
        return Ok(action);
    }
    // §7.4 first-ready reset: the default lifespan counts from readiness.
    let claim = match sync.reset_request {
        Some(end) => writes::requested_end(ctx, claim, end).await.or_halt()?,
        None => claim,
    };
    let rewrite = match binding::propagate(ctx, &claim, resolved, handle.clone(), now).await? {
        Ok(rewrite) => rewrite,
        Err(message) => {
            return report_invalid(ctx, claim, Some(&handle), Some(resolved), message).await;
        }
    };
    if let Some(end) = rewrite.or(bind.and_then(|b| b.rewrite_requested_end)) {
        match writes::requested_end(ctx, claim, end).await? {
            Written::Done(_) | Written::Gone => {}
            Written::Conflict => return Err(Halt::Conflict),
        }
    }
    let action = Action::await_change();
    Ok(wake_with_the_clock(
        ctx,
        templates,
        now,
        action,
        next_crossing,
    ))
}

/// What a bound claim's status mirrors: its handle, the lifespan synced with it, and the
/// template errors of its automatic actions.
struct Mirrored<'a> {
    resolved: &'a ResolvedClaim,
    handle: &'a ResourceHandle,
    lifespan: &'a ClaimStatusLifespan,
    errors: &'a [String],
    /// Why no existing handle fitted, when the handle was made for the claim.
    created_because: Option<&'a str>,
    now: DateTime<Utc>,
}

/// Writes the claim's status from its handle (§7.4, Δ§3.1.3), then the Events the change
/// earns; the claim as written, and the instant its `LifespanEnding` condition crosses its
/// next lead time.
async fn mirror_handle(
    ctx: &ClaimContext,
    claim: ClaimObject,
    bound: &Mirrored<'_>,
) -> Result<(ClaimObject, Option<DateTime<Utc>>), Halt<ClaimError>> {
    let validity = match bound.errors.is_empty() {
        true => Validity::Valid,
        false => Validity::Invalid(bound.errors.join("; ")),
    };
    let previous = invalid_message(claim.status.as_ref()).map(str::to_owned);
    // Δ§3.1.3: a claim that had a lifespan hears about its end changing.
    let recorded_lifespan = claim.status.as_ref().and_then(|s| s.lifespan.as_ref());
    let end_event = lifespan_event(recorded_lifespan, bound.lifespan);
    let states = live_states(ctx, bound.handle).await;
    let ending = lifespan_ending(ctx, Some(bound.lifespan), bound.now);
    let next_crossing = ending.as_ref().and_then(|e| e.next_crossing);
    let before = claim.status.as_ref().and_then(|s| s.conditions.clone());
    let input = StatusInput {
        validity: validity.clone(),
        provider: bound.resolved.status_provider.as_ref(),
        resources: bound.resolved.status_resources.as_deref(),
        approval: None,
        binding: Binding::Bound(BoundHandle {
            handle: bound.handle,
            states: &states,
            lifespan: Some(bound.lifespan.clone()),
            lifespan_ending: ending,
        }),
        generation: claim.metadata.generation,
        domain: ctx.domain(),
        now: bound.now,
        wait: wait::of_bound(ctx, bound.handle, bound.now),
    };
    let claim = writes::status(ctx, claim, &input).await.or_halt()?;
    announce_milestones(ctx, &claim, before.as_deref(), bound).await;
    warn_lifespan_ending(ctx, &claim, before.as_deref()).await;
    if let Some(event) = end_event {
        announce_lifespan_change(ctx, &claim, bound.lifespan, event).await;
    }
    if let Validity::Invalid(message) = validity
        && previous.as_deref() != Some(message.as_str())
    {
        warn_invalid(ctx, &claim, message).await;
    }
    Ok((claim, next_crossing))
}

/// §7 steps 9–10: autoDelete deletes the claim; autoDetach detaches it, then deletes its
/// handle (detached first: the handle controller then leaves the claim alone). `Break` when
/// one of them was done.
async fn act_automatically(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    handle: &HandleObject,
    action: AutoAction,
) -> Result<ControlFlow<Action>, Halt<ClaimError>> {
    match action {
        AutoAction::Nothing => return Ok(ControlFlow::Continue(())),
        AutoAction::Delete => {
            tracing::info!(claim = %binding::claim_key(claim), "autoDelete: deleting the claim");
            writes::delete(ctx, claim).await?;
        }
        AutoAction::Detach => {
            tracing::info!(claim = %binding::claim_key(claim), "autoDetach: detaching the claim");
            writes::detach(ctx, claim).await.or_halt()?;
            delete_handle(ctx, handle).await?;
            ctx.metrics.handle_deleted("detached");
        }
    }
    Ok(ControlFlow::Break(Action::await_change()))
}

/// The claim's `LifespanEnding` condition for its lifespan (its status's `start` and `end`,
/// RFC 3339), under the configured lead times.
fn lifespan_ending(
    ctx: &ClaimContext,
    lifespan: Option<&ClaimStatusLifespan>,
    now: DateTime<Utc>,
) -> Option<warnings::LifespanEnding> {
    let start = lifespan.and_then(|l| l.start.as_deref());
    let end = lifespan.and_then(|l| l.end.as_deref());
    warnings::lifespan_ending(
        start.and_then(|start| lifespan::parse_timestamp("start", start).ok()),
        parse_end(end),
        &ctx.config.lifespan_warnings,
        now,
    )
}

/// An end as claims and their status hold it; one that does not parse is reported elsewhere
/// (the lifespan rules), and counts as none here.
fn parse_end(end: Option<&str>) -> Option<DateTime<Utc>> {
    end.and_then(|end| lifespan::parse_timestamp("end", end).ok())
}

/// A pass that waits for a change also wakes when the clock alone changes what the templates
/// rendered through `templates` (the pass's watching engine) gave, or at `also`
/// (the next expiry warning), whichever comes first.
fn wake_with_the_clock(
    ctx: &ClaimContext,
    templates: &TemplateEngine,
    now: DateTime<Utc>,
    action: Action,
    also: Option<DateTime<Utc>>,
) -> Action {
    let at = ctx
        .template_rerender(templates, now)
        .into_iter()
        .chain(also)
        .min();
    match at {
        Some(at) if action == Action::await_change() => {
            Action::requeue(lifespan::delay_until(at, ctx.now()))
        }
        _ => action,
    }
}

/// Deletes `handle` (uid precondition: not a namesake); already gone is fine.
async fn delete_handle(ctx: &ClaimContext, handle: &HandleObject) -> Result<(), ClaimError> {
    let api = Api::<HandleObject>::namespaced_with(
        ctx.client.clone(),
        handle.metadata.namespace.as_deref().unwrap_or_default(),
        &ctx.kinds.handle,
    );
    write::delete_exact(&api, handle).await?;
    Ok(())
}

/// B18: nothing fits and creation is disabled (or the claim's pool is capped): the
/// claim stays unbound, without error, until an unbound handle appears (its watch wakes the
/// claim).
async fn waiting(
    ctx: &ClaimContext,
    claim: ClaimObject,
    resolved: &ResolvedClaim,
    unbound: Unbound,
) -> Result<Action, Halt<ClaimError>> {
    let now = ctx.now();
    let wait = wait::of_unbound(ctx, &unbound, now);
    let next = next_look(&unbound, wait.is_some());
    let generation = claim.metadata.generation;
    write_unbound(ctx, claim, unbound, |binding| StatusInput {
        validity: Validity::Valid,
        provider: resolved.status_provider.as_ref(),
        resources: resolved.status_resources.as_deref(),
        approval: None,
        wait,
        binding,
        generation,
        domain: ctx.domain(),
        now,
    })
    .await?;
    Ok(next)
}

/// Writes the status of a claim without a handle (`unbound`, which `input` binds); a claim that
/// starts waiting, or waits for other reasons, hears why in an Event.
async fn write_unbound<'a>(
    ctx: &ClaimContext,
    claim: ClaimObject,
    unbound: Unbound,
    input: impl FnOnce(Binding<'a>) -> StatusInput<'a>,
) -> Result<(), Halt<ClaimError>> {
    let (reason, message) = unbound.waiting();
    let said = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| conditions::find(c, conditions::BOUND))
        .is_some_and(|c| c.message == message);
    let claim = writes::status(ctx, claim, &input(Binding::Unbound(unbound)))
        .await
        .or_halt()?;
    if !said {
        let kind = &ctx.kinds.claim;
        ctx.event(&claim, kind, EventKind::Normal, reason, message)
            .await;
    }
    Ok(())
}

/// How long a claim that waits for a pool's handle waits before its next look while no
/// estimate can be made: a handle of its capped pool getting ready, bound as they all are,
/// wakes no waiting claim.
const ESTIMATE_RETRY: Duration = Duration::from_secs(15);

/// When a waiting claim looks again. It is woken by the handle watch when an unbound handle
/// appears or changes (the watch writes the claim index's store before it wakes, so the claim
/// sees that handle). In line, the claims ahead take the free handles, or this one tries after
/// all; waiting for a capped pool without an estimate, it looks for one.
fn next_look(unbound: &Unbound, estimated: bool) -> Action {
    match unbound {
        Unbound::InLine { .. } => Action::requeue(fair_queue::PATIENCE),
        Unbound::WaitingForPool { .. } if !estimated => Action::requeue(ESTIMATE_RETRY),
        _ => Action::await_change(),
    }
}

/// Bad input: the message in the claim's status (Poolboy's fields and the `Valid`
/// condition), a Warning Event when the message is new, and no retry until something changes.
/// A bound claim keeps mirroring its handle.
async fn report_invalid(
    ctx: &ClaimContext,
    claim: ClaimObject,
    handle: Option<&HandleObject>,
    resolved: Option<&ResolvedClaim>,
    message: String,
) -> Result<Action, Halt<ClaimError>> {
    let (namespace, name) = namespace_and_name(&claim);
    ctx.index.stop_waiting(namespace, name);
    let previous = invalid_message(claim.status.as_ref()).map(str::to_owned);
    let handle_view = handle.map(Kinds::handle_of);
    let states = match &handle_view {
        Some(handle) => live_states(ctx, handle).await,
        None => Vec::new(),
    };
    let binding = match &handle_view {
        Some(handle) => Binding::Bound(BoundHandle {
            handle,
            states: &states,
            lifespan: None,
            lifespan_ending: lifespan_ending(
                ctx,
                claim.status.as_ref().and_then(|s| s.lifespan.as_ref()),
                ctx.now(),
            ),
        }),
        None => Binding::Unbound(Unbound::Invalid),
    };
    let input = StatusInput {
        validity: Validity::Invalid(message.clone()),
        provider: resolved.and_then(|r| r.status_provider.as_ref()),
        resources: resolved.and_then(|r| r.status_resources.as_deref()),
        approval: None,
        binding,
        generation: claim.metadata.generation,
        domain: ctx.domain(),
        now: ctx.now(),
        wait: None,
    };
    let written = writes::status(ctx, claim.clone(), &input).await?;
    if let Written::Conflict = written {
        return Err(Halt::Conflict);
    }
    if previous.as_deref() != Some(message.as_str()) {
        warn_invalid(ctx, &claim, message).await;
    }
    Ok(Action::await_change())
}

/// §7 step 2, §7.5: a detached claim is deleted when its `status.lifespan.end` passes, and
/// otherwise left alone, once its handle is gone: the detach deletes the handle, and a delete
/// that failed after the detach was written is retried here.
async fn detached(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    recorded: &crate::api::claim::ClaimHandleRef,
    now: DateTime<Utc>,
) -> Result<Action, Halt<ClaimError>> {
    if let Some(handle) = binding::find_handle(ctx, recorded).await?
        && handle.metadata.deletion_timestamp.is_none()
        && binding::bound_to(&handle, claim)
    {
        tracing::info!(claim = %binding::claim_key(claim), "deleting the handle of a detached claim");
        delete_handle(ctx, &handle).await?;
    }
    match lifespan::detached_claim_expiry(&Kinds::claim_of(claim), now) {
        Ok(Expiry::Expired) => {
            writes::delete(ctx, claim).await?;
            Ok(Action::await_change())
        }
        Ok(Expiry::At(end)) => Ok(Action::requeue(lifespan::delay_until(end, now))),
        Ok(Expiry::Never) => Ok(Action::await_change()),
        Err(e) => {
            tracing::warn!(claim = %binding::claim_key(claim), error = %e, "detached claim has a bad lifespan end");
            Ok(Action::await_change())
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn claim(status: Option<serde_json::Value>, finalizers: &[&str]) -> ClaimObject {
        let mut claim = json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "user", "finalizers": finalizers},
            "spec": {"provider": {"name": "lab"}},
        });
        if let Some(status) = status {
            claim["status"] = status;
        }
        serde_json::from_value(claim).expect("a claim")
    }

    /// §6.3: a new, started claim gets its finalizer with its initialisation; one that waits
    /// for its start, was initialised, or carries a finalizer of some Poolboy mode, does not.
    #[test]
    fn only_a_new_started_claim_defers_its_finalizer() {
        let domain = OperatorDomain::default();
        let open = Ok(StartGate::Open);
        assert!(defers_finalizer(&claim(None, &[]), &open, &domain));
        let later = Ok(StartGate::OpensAt(Utc::now()));
        assert!(!defers_finalizer(&claim(None, &[]), &later, &domain));
        let initialised = claim(Some(json!({"provider": {"name": "lab"}})), &[]);
        assert!(!defers_finalizer(&initialised, &open, &domain));
        for finalizer in ["poolboy.gpte.redhat.com", "poolboy.gpte.redhat.com/handler"] {
            assert!(!defers_finalizer(
                &claim(None, &[finalizer]),
                &open,
                &domain
            ));
        }
    }

    #[test]
    fn a_claim_waiting_for_a_capped_pool_looks_again_until_it_can_tell_its_wait() {
        let capped = Unbound::WaitingForPool {
            pool: "lab".to_owned(),
            max_size: 1,
            why: String::new(),
        };
        assert_eq!(next_look(&capped, false), Action::requeue(ESTIMATE_RETRY));
        assert_eq!(next_look(&capped, true), Action::await_change());
        let in_line = Unbound::InLine {
            pool: "lab".to_owned(),
            ahead: 2,
            of: 5,
        };
        let patience = Action::requeue(fair_queue::PATIENCE);
        assert_eq!(next_look(&in_line, true), patience);
        let creation_off = Unbound::WaitingForHandle { why: String::new() };
        assert_eq!(next_look(&creation_off, false), Action::await_change());
    }
}

//! The ResourceHandle controller (§12, §13, §14; Δ§3.2 Manage, update_status, Delete).
//!
//! A reconcile observes the handle, its bound claim (a GET: the store may lag) and the live
//! states of its resources (the managed stores, a GET when missing); asks `core` for the plan of
//! each resource and the status; creates or patches the resources; writes the status, with
//! their references and new states, once; and requeues at `spec.lifespan.end`. Every write
//! to the handle is guarded by its resourceVersion; a conflict recomputes from a fresh read.

mod finalize;
mod resources;

use std::ops::ControlFlow;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use futures::channel::mpsc::UnboundedReceiver;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::backlog::Backlog;
use super::backlogged::Backlogged;
use super::context::{Context, EventKind};
use super::managed;
use super::oversized;
use super::reconciler::{self, Drive, Lifecycle};
use super::write::{self, Halt, OrHalt, PassError, Target, Written};
use crate::api::kinds::{HandleObject, Kinds};
use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle};
use crate::core::binding::matching::{is_free, is_released};
use crate::core::conditions;
use crate::core::handle::definition::{Requester, status_references};
use crate::core::handle::plan::{
    HandlePlanError, HandleProviders, PlanEnvironment, PlanInput, ResourcePlan,
    generated_resources, plan_resources,
};
use crate::core::handle::status::{
    ApplyFailure, ApplyFailureReason, StatusInput, desired_status, problem_message, status_patch,
    summary_provider_name,
};
use crate::core::json::patch::{PatchError, to_json_patch};
use crate::core::lifespan::{Expiry, delay_until, handle_expiry};
use crate::core::provider::{CompiledProvider, ProviderCompiler};
use crate::core::template::TemplateEngine;
use crate::shutdown::Shutdown;
use crate::store::health::WatchHealth;
use crate::store::packed::StoredHandle;
use crate::store::render_clocks::RenderInputs;
use crate::store::shared_watch::{ListedStore, SharedWatch};

#[derive(Debug, thiserror::Error)]
pub(crate) enum HandleError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("cannot build a JSON patch: {0}")]
    Patch(#[from] PatchError),
    #[error("cannot turn a resource definition into an object: {0}")]
    Definition(#[from] serde_json::Error),
    #[error("the managed resource {0} kept changing under concurrent writes")]
    ResourceContended(String),
    #[error(transparent)]
    Unpack(#[from] crate::store::packed::UnpackError),
    /// Retried with backoff: the object may shrink, or the API server's limit grow.
    #[error("the status is too large to write: {0}")]
    StatusTooLarge(#[source] kube::Error),
}

/// The controller, driving the broker's handle watch (`handles`, from [`watch`]), which the claim and pool controllers follow. Claim changes wake it
/// through its triggers, from the claim watch (`claim::controller`), once the claim store has
/// them: a handle reads its claim from that store. Its store is the index of handles every
/// controller reads (`Context::stores`).
pub(crate) fn controller(
    kinds: &Kinds,
    handles: SharedWatch<HandleObject>,
    concurrency: u16,
    backlogged: &Backlogged,
) -> HandleController {
    let listed = handles.store();
    let store = listed.store().clone();
    let (backlog, released) =
        Backlog::new(kinds.stored_handle.clone(), concurrency, backlogged.clone());
    let own = backlog.objects(handles.into_stream());
    let controller =
        Controller::for_stream_with(own, store, kinds.stored_handle.clone()).reconcile_on(released);
    HandleController {
        controller,
        backlog,
        listed,
    }
}

/// The handle controller, and the backlog every trigger of it passes.
pub(crate) struct HandleController {
    controller: Controller<StoredHandle>,
    backlog: Backlog<StoredHandle>,
    listed: ListedStore<StoredHandle>,
}

impl HandleController {
    /// The store of handles, the one every controller reads (`Context::stores`).
    pub(crate) fn store(&self) -> ListedStore<StoredHandle> {
        self.listed.clone()
    }
}

/// The broker's one watch of handles (of `operator_namespace`), for [`controller`] to drive
/// once the claim and pool controllers follow it.
pub(crate) fn watch(
    client: &Client,
    kinds: &Kinds,
    operator_namespace: &str,
    health: &WatchHealth,
) -> SharedWatch<HandleObject> {
    let api =
        Api::<HandleObject>::namespaced_with(client.clone(), operator_namespace, &kinds.handle);
    let config = crate::store::shared_watch::watch_config();
    let mut handles = SharedWatch::new(api, config, kinds.stored_handle.clone(), health);
    handles.follow_deletes(write::forget_replaced);
    handles
}

/// Runs `controller` until `shutdown`; `triggers` wake it from outside its watches.
pub(crate) async fn run(
    HandleController {
        controller,
        backlog,
        listed: _,
    }: HandleController,
    ctx: Arc<Context>,
    triggers: UnboundedReceiver<ObjectRef<StoredHandle>>,
    concurrency: u16,
    shutdown: Shutdown,
) {
    let drive = Drive {
        triggers: Some(triggers),
        backlog: Some(backlog),
        concurrency,
        shutdown,
    };
    reconciler::run(controller, drive, Arc::new(HandleContext(ctx))).await;
}

/// What handle reconciles share: the operator context.
pub(crate) struct HandleContext(Arc<Context>);

impl Lifecycle for HandleContext {
    const KIND: &'static str = "ResourceHandle";
    type Stored = StoredHandle;
    type Object = HandleObject;
    type Error = HandleError;
    type Carry = ();

    fn context(&self) -> &Context {
        &self.0
    }

    fn unpack(stored: &StoredHandle) -> Result<HandleObject, HandleError> {
        Ok(stored.unpack()?)
    }

    /// Once resumed, the handle renders at the clock's time.
    fn ignored(&self, handle: &HandleObject) {
        self.0.stores.render_clocks.forget(&uid_of(handle));
    }

    async fn finalize(
        &self,
        handle: &HandleObject,
        _: &mut (),
    ) -> Result<Action, Halt<HandleError>> {
        self.0.stores.render_clocks.forget(&uid_of(handle));
        finalize::finalize(handle, &self.0).await
    }

    async fn pass(&self, handle: HandleObject, _: &mut ()) -> Result<Action, Halt<HandleError>> {
        manage(handle, &self.0).await
    }

    async fn reread(
        &self,
        _: Option<&str>,
        name: &str,
    ) -> Result<Option<HandleObject>, HandleError> {
        Ok(self.0.handles_api().get_opt(name).await?)
    }
}

impl PassError for HandleError {}

/// How soon a handle whose claim is being deleted looks again whether the claim is gone.
const CLAIM_DELETION_RECHECK: chrono::TimeDelta = chrono::TimeDelta::seconds(5);

/// One pass of Δ§3.2 Manage over `object`.
async fn manage(object: HandleObject, ctx: &Context) -> Result<Action, Halt<HandleError>> {
    let name = object.name_any();
    ctx.stores.claim_readers.pass_begins(&name);
    // A handle a claim let go of may hold resources rendered for that claim; it is deleted,
    // as long as it is still unbound and released (a binder with a stale copy may have bound
    // it since: then it is that claim's).
    if is_released_handle(&object, ctx.domain()) {
        return delete_released(ctx, &object).await;
    }
    let problem_before = problem_message(object.status.as_ref()).map(str::to_owned);
    let api = ctx.handles_api();
    let object = write::ensure_poolboy_finalizer(&api, object, ctx.domain())
        .await
        .or_halt()?;
    let now = ctx.now();
    let mut problems = Vec::new();
    let (expiry, claim) = match lifespan_and_claim(ctx, &object, now, &mut problems).await? {
        ControlFlow::Continue(found) => found,
        ControlFlow::Break(action) => return Ok(action),
    };
    // The passes the handle's own writes cause render at the instant its templates
    // last read the clock, until the re-render they asked for.
    let uid = uid_of(&object);
    let inputs = RenderInputs::of(&Kinds::handle_of(&object), claim.as_ref(), ctx.domain());
    let render_at = ctx.stores.render_clocks.render_at(&uid, &inputs, now);
    let clock = PassClock { now, render_at };
    // What this pass's templates make of the clock decides when it runs again.
    let templates = ctx.templates.watching();
    let object = regenerate(
        ctx,
        object,
        claim.as_ref(),
        &templates,
        clock,
        &mut problems,
    )
    .await?;
    let handle = Kinds::handle_of(&object);
    let (planned, mut states) = plan(ctx, &handle, claim.as_ref(), &templates, clock).await?;
    let mut status = Status {
        templates: &templates,
        providers: &planned.providers,
        summary_provider: planned.summary_provider.as_deref(),
        plans: &planned.plans,
        problems: &problems,
        apply_failures: Vec::new(),
        clock,
    };
    // One status write, after the creates, records the references with the states the
    // creates returned (Poolboy writes the references first, §12.4 step 7 before step 9).
    // A deletion that begins in between fails that write, and the finalizer deletes what the
    // pass made (`store::unrecorded`). What a process that dies in between leaves is found
    // too: a resource's name is its definition's, so the next pass's create meets it (409)
    // and records it; and a resource whose handle is deleted meanwhile is an orphan
    // (`managed::orphans`).
    let first_error = apply_all(ctx, &object, &planned, &mut states, &mut status).await;
    let before = object.status.clone();
    let object = write_status(ctx, &object, &status, &states)
        .await
        .or_halt()?;
    ctx.stores.unrecorded.forget(&uid);
    report_problem(ctx, &object, problem_before.as_deref(), claim.as_ref()).await;
    report_apply_failure(ctx, &object, before.as_ref(), claim.as_ref()).await;
    if let Some(error) = first_error {
        return Err(Halt::Failed(error));
    }
    // The earlier of the lifespan's end and the next instant a template's result changes.
    let rerender = ctx.template_rerender(&templates, render_at);
    ctx.stores
        .render_clocks
        .record(&uid, inputs, render_at, rerender);
    ctx.stores
        .claim_readers
        .pass_ended(&name, templates.claim_read());
    // A claim being deleted deletes its handle; should it finish without doing so (it was
    // deleted while it bound this handle, before the claim store showed the bind), this handle
    // learns that its claim is gone from a look of its own, not from a delete event that may
    // have passed it by.
    let claim_deleting = claim
        .as_ref()
        .is_some_and(|c| c.metadata.deletion_timestamp.is_some());
    let recheck = claim_deleting.then(|| ctx.now() + CLAIM_DELETION_RECHECK);
    Ok(
        match expiry.into_iter().chain(rerender).chain(recheck).min() {
            Some(at) => Action::requeue(delay_until(at, ctx.now())),
            None => Action::await_change(),
        },
    )
}

/// The live state of each resource the handle's status references (None where it has none).
async fn live_states(
    ctx: &Context,
    handle: &ResourceHandle,
) -> Result<Vec<Option<Value>>, HandleError> {
    let mut states = Vec::new();
    for reference in status_references(handle) {
        states.push(match reference {
            Some(reference) => managed::caught_up_state(ctx, &reference).await?,
            None => None,
        });
    }
    Ok(states)
}

/// Whether `handle` is unbound and released by a claim.
fn is_released_handle(handle: &HandleObject, domain: &OperatorDomain) -> bool {
    is_free(&handle.metadata, &handle.spec) && is_released(&handle.metadata, domain)
}

/// Deletes a handle a claim released, while it still is one.
async fn delete_released(
    ctx: &Context,
    object: &HandleObject,
) -> Result<Action, Halt<HandleError>> {
    tracing::info!(handle = %object.name_any(), "deleting a handle released by a claim");
    ctx.stores.render_clocks.forget(&uid_of(object));
    let released = |h: &HandleObject| is_released_handle(h, ctx.domain());
    match write::delete_while(&ctx.handles_api(), object, 3, released).await? {
        Written::Conflict => return Err(Halt::Conflict),
        Written::Done(()) => ctx.metrics.handle_deleted("released"),
        Written::Gone => {}
    }
    Ok(Action::await_change())
}

/// The end of the handle's lifespan, and its bound claim, fresh (the store may lag behind a
/// bind). `Break` when the handle is deleted instead: past its end (Δ§3.2 Manage step 3,
/// B10), or its claim is gone.
async fn lifespan_and_claim(
    ctx: &Context,
    object: &HandleObject,
    now: DateTime<Utc>,
    problems: &mut Vec<String>,
) -> Result<ControlFlow<Action, (Option<DateTime<Utc>>, Option<ResourceClaim>)>, Halt<HandleError>>
{
    let handle = Kinds::handle_of(object);
    let expiry = match handle_expiry(&handle, now) {
        Ok(Expiry::Expired) => {
            tracing::info!(handle = %object.name_any(), "lifespan ended; deleting the handle");
            let note = "the lifespan ended: deleting the handle, its resources and its claim";
            announce_deletion(ctx, object, "LifespanEnded", note).await;
            delete_handle(ctx, object).await?;
            ctx.metrics.handle_deleted("lifespan_ended");
            return Ok(ControlFlow::Break(Action::await_change()));
        }
        Ok(Expiry::At(end)) => Some(end),
        Ok(Expiry::Never) => None,
        Err(error) => {
            problems.push(error.to_string());
            None
        }
    };
    let Some(reference) = &handle.spec.resource_claim else {
        return Ok(ControlFlow::Continue((expiry, None)));
    };
    if let Some(claim) = get_claim(ctx, reference).await? {
        return Ok(ControlFlow::Continue((expiry, Some(claim))));
    }
    tracing::info!(handle = %object.name_any(), claim = %reference.name,
        "bound ResourceClaim is gone; deleting the handle");
    let note = format!(
        "ResourceClaim {} is gone: deleting the handle and its resources",
        qualified_name(Some(&reference.namespace), &reference.name)
    );
    announce_deletion(ctx, object, "ClaimDeleted", &note).await;
    delete_handle(ctx, object).await?;
    ctx.metrics.handle_deleted("claim_deleted");
    Ok(ControlFlow::Break(Action::await_change()))
}

/// Δ§3.2 Manage step 4: a handle with spec.provider regenerates its resources; the handle as
/// written, with what was refused among `problems`.
async fn regenerate(
    ctx: &Context,
    object: HandleObject,
    claim: Option<&ResourceClaim>,
    templates: &TemplateEngine,
    clock: PassClock,
    problems: &mut Vec<String>,
) -> Result<HandleObject, Halt<HandleError>> {
    let handle = Kinds::handle_of(&object);
    let generated = ctx.providers(|catalog| {
        let env = plan_environment(ctx, templates, catalog, clock);
        generated_resources(&env, &handle, claim)
    });
    match generated {
        Ok(Some(generated)) => {
            problems.extend(generated.refused);
            if !generated.patch.0.is_empty() {
                let api = ctx.handles_api();
                let ops = generated.patch.0;
                return write::patch(&api, &object, Target::Object, ops)
                    .await
                    .or_halt();
            }
        }
        Ok(None) => {}
        Err(error @ (HandlePlanError::Provider(_) | HandlePlanError::Generation(_))) => {
            problems.push(error.to_string())
        }
    }
    Ok(object)
}

/// §12.3 step 7: the requester of a bound claim's namespace; a failed lookup leaves the
/// requester variables absent rather than stopping the handle.
async fn requester_of(ctx: &Context, claim: Option<&ResourceClaim>) -> Option<Requester> {
    let namespace = claim?.metadata.namespace.as_deref()?;
    match ctx.requesters.requester(&ctx.client, namespace).await {
        Ok(requester) => requester,
        Err(error) => {
            tracing::warn!(%error, %namespace, "cannot look up the requester");
            None
        }
    }
}

/// The plan of each resource, with the providers it was made with.
struct Planned {
    providers: HandleProviders,
    summary_provider: Option<Arc<CompiledProvider>>,
    plans: Vec<ResourcePlan>,
}

/// The plan of each resource, from the live states it returns beside it.
async fn plan(
    ctx: &Context,
    handle: &ResourceHandle,
    claim: Option<&ResourceClaim>,
    templates: &TemplateEngine,
    clock: PassClock,
) -> Result<(Planned, Vec<Option<Value>>), HandleError> {
    let states = live_states(ctx, handle).await?;
    let requester = requester_of(ctx, claim).await;
    let planned = ctx.providers(|catalog| {
        let compiler = ProviderCompiler {
            domain: ctx.domain(),
            templates: &ctx.templates,
            schemas: &ctx.schemas,
        };
        let providers = HandleProviders::resolve(handle, catalog, &compiler);
        let env = plan_environment(ctx, templates, catalog, clock);
        let input = PlanInput {
            handle,
            claim,
            providers: &providers,
            states: &states,
            requester: requester.as_ref(),
        };
        let plans = plan_resources(&env, &input);
        let summary_provider =
            summary_provider_name(handle).and_then(|name| catalog.get(name).ok().cloned());
        Planned {
            providers,
            summary_provider,
            plans,
        }
    });
    Ok((planned, states))
}

/// Creates or patches every resource the plan applies, recording each one's new state in
/// `states` and each failure in `status`; the first failure.
async fn apply_all(
    ctx: &Context,
    object: &HandleObject,
    planned: &Planned,
    states: &mut [Option<Value>],
    status: &mut Status<'_>,
) -> Option<HandleError> {
    let mut first_error = None;
    let recorded = status_references(object);
    for (index, plan) in planned.plans.iter().enumerate() {
        let ResourcePlan::Apply {
            definition,
            reference,
        } = plan
        else {
            continue;
        };
        let Some(provider) = planned.providers.get(index) else {
            continue;
        };
        let known = states.get(index).cloned().flatten();
        match resources::apply(ctx, provider, reference, definition, known).await {
            Ok(applied) => {
                let was_recorded = recorded.get(index).and_then(Option::as_ref) == Some(reference);
                // Until the status write after these creates, the finalizer learns of the
                // resource from here.
                if !was_recorded {
                    ctx.stores.unrecorded.made(&uid_of(object), reference);
                }
                // A first create is told by the status reference this pass writes; an Event
                // says only that a resource the status referenced was gone and is made again
                // (docs/compatibility.md, "handle Events").
                if applied.created && was_recorded {
                    let name = qualified_name(reference.namespace.as_deref(), &reference.name);
                    let note = format!("created {} {name} again: it was gone", reference.kind);
                    let kind = &ctx.kinds.handle;
                    ctx.event(object, kind, EventKind::Normal, "ResourceCreated", note)
                        .await;
                }
                if let Some(slot) = states.get_mut(index) {
                    *slot = Some(applied.state);
                }
            }
            Err(error) => {
                tracing::warn!(%error, handle = %object.name_any(), resource = index,
                    "cannot create or update a managed resource");
                status.apply_failures.push(apply_failure(index, &error));
                first_error.get_or_insert(error);
            }
        }
    }
    first_error
}

/// The clock as one pass reads it: its time, and the instant its templates render at.
#[derive(Clone, Copy)]
struct PassClock {
    now: chrono::DateTime<chrono::Utc>,
    render_at: chrono::DateTime<chrono::Utc>,
}

fn plan_environment<'a>(
    ctx: &'a Context,
    templates: &'a TemplateEngine,
    catalog: &'a crate::core::provider::ProviderCatalog,
    clock: PassClock,
) -> PlanEnvironment<'a> {
    PlanEnvironment {
        catalog,
        templates,
        domain: ctx.domain(),
        now: clock.now,
        render_at: clock.render_at,
    }
}

fn uid_of(handle: &HandleObject) -> String {
    handle.metadata.uid.clone().unwrap_or_default()
}

/// What the status is computed from, besides the handle and the states.
struct Status<'a> {
    /// The pass's watching engine.
    templates: &'a TemplateEngine,
    providers: &'a HandleProviders,
    summary_provider: Option<&'a CompiledProvider>,
    plans: &'a [ResourcePlan],
    problems: &'a [String],
    /// The resources this pass could not create or update.
    apply_failures: Vec<ApplyFailure>,
    clock: PassClock,
}

/// Writes the status computed from `object` and `states` where it differs (§13, B08, B23).
async fn write_status(
    ctx: &Context,
    object: &HandleObject,
    status: &Status<'_>,
    states: &[Option<Value>],
) -> Result<Written<HandleObject>, HandleError> {
    let handle = Kinds::handle_of(object);
    let desired = ctx.providers(|catalog| {
        let env = plan_environment(ctx, status.templates, catalog, status.clock);
        desired_status(
            &env,
            &StatusInput {
                handle: &handle,
                providers: status.providers,
                summary_provider: status.summary_provider,
                plans: status.plans,
                states,
                problems: status.problems,
                apply_failures: &status.apply_failures,
            },
        )
    });
    for failure in &desired.failures {
        tracing::debug!(handle = %object.name_any(), %failure, "handle status template failed");
    }
    let ops = status_patch(object.status.as_ref(), &desired.status);
    if ops.is_empty() {
        return Ok(Written::Done(object.clone()));
    }
    let patch = to_json_patch(&ops)?;
    let api = ctx.handles_api();
    match write::patch(&api, object, Target::Status, patch.0).await {
        Err(error) if oversized::is_too_large(&error) => {
            let conditions = object.status.as_ref().and_then(|s| s.conditions.as_deref());
            oversized::report(ctx, &api, object, &ctx.kinds.handle, conditions, &error).await;
            Err(HandleError::StatusTooLarge(error))
        }
        written => Ok(written?),
    }
}

/// What the API server said when resource `index` could not be created or updated.
fn apply_failure(index: usize, error: &HandleError) -> ApplyFailure {
    let (reason, message) = match error {
        HandleError::Kube(kube::Error::Api(status)) => (
            ApplyFailureReason::of_status(status.code),
            status.message.clone(),
        ),
        HandleError::Definition(error) => (ApplyFailureReason::Refused, error.to_string()),
        other => (ApplyFailureReason::Failed, other.to_string()),
    };
    ApplyFailure {
        index,
        reason,
        message,
    }
}

/// A Warning Event on the handle and its claim when a resource could not be applied and the
/// `Ready` condition says something new about it, so that a failure such as a 403 reaches more
/// than the log. Only the process whose status write made the change reports it.
async fn report_apply_failure(
    ctx: &Context,
    object: &HandleObject,
    before: Option<&crate::api::handle::ResourceHandleStatus>,
    claim: Option<&ResourceClaim>,
) {
    let Some(ready) = conditions::news(
        before.and_then(|s| s.conditions.as_deref()),
        object.status.as_ref().and_then(|s| s.conditions.as_deref()),
        conditions::READY,
    )
    .filter(|c| ApplyFailureReason::parse(&c.reason).is_some()) else {
        return;
    };
    let (reason, message) = (ready.reason.clone(), ready.message.clone());
    ctx.event(
        object,
        &ctx.kinds.handle,
        EventKind::Warning,
        &reason,
        message.clone(),
    )
    .await;
    if let Some(claim) = claim {
        let claim = ctx.kinds.claim_object(claim.clone());
        let note = format!("ResourceHandle {}: {message}", object.name_any());
        ctx.event(&claim, &ctx.kinds.claim, EventKind::Warning, &reason, note)
            .await;
    }
}

/// A Warning Event on the handle and its claim, once per new problem (the `Valid` condition's
/// message changed): the claim's owner is the one who can fix a template the claim fills in.
async fn report_problem(
    ctx: &Context,
    object: &HandleObject,
    before: Option<&str>,
    claim: Option<&ResourceClaim>,
) {
    let Some(problem) = problem_message(object.status.as_ref()) else {
        return;
    };
    if Some(problem) == before {
        return;
    }
    ctx.metrics.invalid("ResourceHandle");
    ctx.event(
        object,
        &ctx.kinds.handle,
        EventKind::Warning,
        "InvalidResource",
        problem.to_owned(),
    )
    .await;
    if let Some(claim) = claim {
        let claim = ctx.kinds.claim_object(claim.clone());
        let note = format!("ResourceHandle {}: {problem}", object.name_any());
        ctx.event(
            &claim,
            &ctx.kinds.claim,
            EventKind::Warning,
            "InvalidResource",
            note,
        )
        .await;
    }
}

/// A Normal Event on the handle about to be deleted, announced by the process that
/// decided to delete it; its finalizer tells the claim when it takes the claim along.
async fn announce_deletion(ctx: &Context, object: &HandleObject, reason: &str, note: &str) {
    ctx.event(
        object,
        &ctx.kinds.handle,
        EventKind::Normal,
        reason,
        note.to_owned(),
    )
    .await;
}

/// `namespace/name`, or `name` for a cluster-scoped object.
fn qualified_name(namespace: Option<&str>, name: &str) -> String {
    match namespace.filter(|ns| !ns.is_empty()) {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

/// Deletes the handle (this very one: uid precondition); its finalizer does the rest.
async fn delete_handle(ctx: &Context, object: &HandleObject) -> Result<(), HandleError> {
    // Gone already, or a namesake: either way this handle is no more.
    write::delete_exact(&ctx.handles_api(), object).await?;
    Ok(())
}

/// How long a handle pass waits for the claims' first list before it asks for its claim. Long:
/// the handles' list may end well before the claims' (at 100,000 claims, 2 to 5 s in one answer
/// each, and half a minute or more when a kind is listed page by page and its pages come from
/// etcd: docs/design.md, "runtime::paged_answers"), and every pass that gives up asks for its
/// claim alone; a claims watch that never lists (its kind forbidden) holds the handle passes that
/// read claims this long, once.
const CLAIMS_LIST_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// The claim `reference` names, as `core` sees it; `None` when it is gone. From the claim
/// store, which has every change that woke this reconcile (`claim::controller`); one it lacks
/// is asked for, since `None` deletes the handle. At a start the handles are often listed
/// before the claims (a list of claims is the larger): a pass then waits for the claims' list,
/// up to [`CLAIMS_LIST_WAIT`], rather than ask for each claim on its own.
async fn get_claim(
    ctx: &Context,
    reference: &crate::api::refs::ObjectRef,
) -> Result<Option<ResourceClaim>, kube::Error> {
    let key = ObjectRef::new_with(&reference.name, ctx.kinds.stored_claim.clone())
        .within(&reference.namespace);
    let stored = ctx
        .stores
        .claims
        .get_once_listed(&key, CLAIMS_LIST_WAIT)
        .await;
    if let Some(claim) = stored.and_then(|c| c.unpack().ok()) {
        return Ok(Some(Kinds::claim_of(&claim)));
    }
    let claim = ctx
        .claims_api(&reference.namespace)
        .get_opt(&reference.name)
        .await?;
    Ok(claim.as_ref().map(Kinds::claim_of))
}

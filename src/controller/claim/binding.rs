//! Giving a claim a handle (§7.1, §7.2, Δ§3.2): adopt one already bound to it, else bind the
//! best unbound match with one guarded JSON patch (B01), else create one unless creation is
//! disabled (B18). Also: finding the bound handle, releasing a handle bound twice by racing
//! processes, and propagating claim edits to the handle (§7 step 11).

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use kube::ResourceExt;
use kube::api::Patch;

use super::super::write::{self, Target, Written};
use super::{ClaimContext, ClaimError};
use crate::api::ResourceHandle;
use crate::api::claim::ClaimHandleRef;
use crate::api::kinds::{ClaimObject, HandleObject, Kinds};
use crate::core::binding::bind::unbind_patch;
use crate::core::binding::matching::{explain_no_fit, is_bind_candidate, is_free};
use crate::core::claim::resolve::{ResolvedClaim, requested_pool};
use crate::core::claim::status::Unbound;
use crate::core::naming::claim_handle_name;

/// A handle just given to the claim, not yet recorded in its status.
#[derive(Clone)]
pub(crate) struct Pending {
    pub(crate) handle: HandleObject,
    /// The claim's requested end, clamped (§10.4 fix), to write back.
    pub(crate) rewrite_requested_end: Option<DateTime<Utc>>,
    /// When this process gave it.
    pub(crate) bound_at: Instant,
    /// The pass's instant the bind was decided at (its lifespan's clock): the claim's
    /// `status.lifespan.start`, so that its end is the handle's default after it to the second.
    pub(crate) bound_on: DateTime<Utc>,
    /// Why no existing handle fitted, when this one was made for the claim: its `Bound`
    /// Event says it.
    pub(crate) created_because: Option<String>,
}

impl Pending {
    fn new(
        handle: HandleObject,
        rewrite_requested_end: Option<DateTime<Utc>>,
        bound_on: DateTime<Utc>,
    ) -> Self {
        Self {
            handle,
            rewrite_requested_end,
            bound_at: Instant::now(),
            bound_on,
            created_because: None,
        }
    }

    pub(crate) fn name(&self) -> &str {
        self.handle.metadata.name.as_deref().unwrap_or_default()
    }
}

/// What binding found.
pub(crate) enum Outcome {
    Bound(Box<Pending>),
    /// Nothing fits, and no handle may be made for the claim: why.
    Waiting(Unbound),
    /// A lifespan or template of a provider fails for this claim.
    Invalid(String),
}

/// Whether `handle` names `claim` as its claim.
pub(crate) fn bound_to(handle: &HandleObject, claim: &ClaimObject) -> bool {
    handle.spec.resource_claim.as_ref().is_some_and(|r| {
        Some(r.name.as_str()) == claim.metadata.name.as_deref()
            && Some(r.namespace.as_str()) == claim.metadata.namespace.as_deref()
    })
}

/// The freshest copy of `bound`, a handle a pass of `claim` bound: the store's once it shows
/// the bind (with what the handle's own passes wrote since), else `bound` itself.
pub(crate) fn latest_copy(
    ctx: &ClaimContext,
    bound: &HandleObject,
    claim: &ClaimObject,
) -> HandleObject {
    let name = bound.metadata.name.as_deref().unwrap_or_default();
    ctx.stored_handle(name)
        .filter(|h| bound_to(h, claim) && h.metadata.generation >= bound.metadata.generation)
        .map_or_else(|| bound.clone(), |stored| (*stored).clone())
}

/// The handle the claim's status names: from the claim controller's store, else from the
/// API (the store may not show a handle created a moment ago). `None` only when the API
/// server says 404; a handle being deleted is still there (§16: never rebind then).
///
/// Looked up by name in the operator namespace, where handles live, as Poolboy does (§7 step
/// 5): the namespace the status records is not read, so a status restored from an installation
/// with another operator namespace still finds its handle.
pub(crate) async fn find_handle(
    ctx: &ClaimContext,
    reference: &ClaimHandleRef,
) -> Result<Option<HandleObject>, ClaimError> {
    if let Some(handle) = ctx.stored_handle(&reference.name) {
        return Ok(Some((*handle).clone()));
    }
    Ok(ctx.handles_api().get_opt(&reference.name).await?)
}

/// Gives the claim a handle (§7.1, §7.2, Δ§3.2).
pub(crate) async fn bind_or_create(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    resolved: &ResolvedClaim,
    now: DateTime<Utc>,
) -> Result<Outcome, ClaimError> {
    // One snapshot for both questions: a handle another process just bound to this claim is
    // either seen bound here (adopted) or seen unbound (its bind patch then fails, and the
    // fresh read after the failure shows it bound to this claim).
    let snapshot = ctx.index.free_handles();
    if let Some(handle) = adoptable(ctx, claim).await? {
        return Ok(Outcome::Bound(Box::new(Pending::new(handle, None, now))));
    }
    if let Some(waiting) = super::limits::admit(ctx, claim, resolved) {
        return Ok(Outcome::Waiting(waiting));
    }
    match bind(ctx, claim, resolved, &snapshot, now).await? {
        Bind::Bound(pending) => return Ok(Outcome::Bound(pending)),
        Bind::InLine(waiting) => return Ok(Outcome::Waiting(waiting)),
        Bind::Nothing => {}
    }
    // Another process may have bound this very claim while the search went on: adopt its
    // handle, never make a second.
    if let Some(handle) = adoptable(ctx, claim).await? {
        return Ok(Outcome::Bound(Box::new(Pending::new(handle, None, now))));
    }
    let why = why_no_handle_fits(ctx, claim, resolved, &snapshot, now);
    if !resolved.creation_allowed() {
        return Ok(Outcome::Waiting(Unbound::WaitingForHandle { why }));
    }
    if let Some(waiting) = capped_pool(ctx, claim, why.clone()).await? {
        return Ok(Outcome::Waiting(waiting));
    }
    let mut outcome = create(ctx, claim, resolved, now).await?;
    // The answer to "why didn't my claim match?", in the `Bound` Event of its own handle.
    if let Outcome::Bound(pending) = &mut outcome {
        pending.created_because = Some(why);
    }
    Ok(outcome)
}

/// Why none of the operator namespace's handles fits the claim, in a line.
fn why_no_handle_fits(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    resolved: &ResolvedClaim,
    snapshot: &[Arc<HandleObject>],
    now: DateTime<Utc>,
) -> String {
    let namespace = ctx.config.operator_namespace.as_str();
    // Only free handles are explained: bound ones need no copy (a cold claim made one of each
    // of the namespace's handles, 100,000 at `make bench-scale`'s size).
    let handles: Vec<Arc<ResourceHandle>> = snapshot
        .iter()
        .filter(|h| {
            h.metadata.namespace.as_deref() == Some(namespace) && is_free(&h.metadata, &h.spec)
        })
        .map(|h| ctx.index.view_of(h))
        .collect();
    let pool_name = requested_pool(&claim.metadata, ctx.domain());
    match resolved.rejections(pool_name, handles.iter().map(|h| h.as_ref()), now) {
        Ok(rejections) => explain_no_fit(&rejections),
        Err(error) => error.to_string(),
    }
}

/// The pool the claim names, when a `maxSize` caps it: such a pool is the only
/// source of handles for the claims that name it, or they would get around the cap.
async fn capped_pool(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    why: String,
) -> Result<Option<Unbound>, ClaimError> {
    let Some(pool) = requested_pool(&claim.metadata, ctx.domain()) else {
        return Ok(None);
    };
    Ok(max_size(ctx, pool)
        .await?
        .map(|max_size| Unbound::WaitingForPool {
            pool: pool.to_owned(),
            max_size,
            why,
        }))
}

/// The `maxSize` of pool `pool` of the operator namespace, if it has one. A pool the store
/// does not show is read from the API server: at start-up the pool store may not have listed
/// yet, and a claim that took that for "no such pool" got a handle past the cap.
async fn max_size(ctx: &ClaimContext, pool: &str) -> Result<Option<i64>, ClaimError> {
    Ok(match ctx.stored_pool(pool) {
        Some(stored) => stored.spec.max_size,
        None => ctx
            .pools_api()
            .get_opt(pool)
            .await?
            .and_then(|fresh| fresh.spec.max_size),
    })
}

/// A handle already bound to the claim: a bind whose status write was lost, a restart, or
/// another process that was quicker. Confirmed with a GET, so that a recreated claim of the
/// same name never takes over the handle of its predecessor, which is being deleted.
async fn adoptable(
    ctx: &ClaimContext,
    claim: &ClaimObject,
) -> Result<Option<HandleObject>, ClaimError> {
    for name in live_bound_handles(ctx, claim) {
        let fresh = ctx.handles_api().get_opt(&name).await?;
        if let Some(fresh) =
            fresh.filter(|h| h.metadata.deletion_timestamp.is_none() && bound_to(h, claim))
        {
            return Ok(Some(fresh));
        }
    }
    Ok(None)
}

/// [`bound_handles`] that the handle watch shows and not being deleted.
fn live_bound_handles(ctx: &ClaimContext, claim: &ClaimObject) -> Vec<String> {
    let mut names = bound_handles(ctx, claim);
    names.retain(|name| {
        ctx.stored_handle(name)
            .is_some_and(|h| h.metadata.deletion_timestamp.is_none())
    });
    names
}

/// The names of the handles whose `spec.resourceClaim` names `claim`, as the handle watch
/// last showed them.
fn bound_handles(ctx: &ClaimContext, claim: &ClaimObject) -> Vec<String> {
    let (namespace, name) = super::namespace_and_name(claim);
    ctx.index.bound_to(namespace, name)
}

/// The stored handles bound to the claim besides `recorded`, the one its status names: a
/// process died between binding one and recording it, or lost a race and died before
/// releasing it.
fn strays(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    recorded: Option<&str>,
) -> Vec<Arc<HandleObject>> {
    bound_handles(ctx, claim)
        .into_iter()
        .filter(|name| Some(name.as_str()) != recorded)
        .filter_map(|name| ctx.stored_handle(&name))
        .collect()
}

/// [`release`]s each of the claim's [`strays`].
pub(crate) async fn release_strays(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    recorded: &str,
) -> Result<(), ClaimError> {
    for stray in strays(ctx, claim, Some(recorded)) {
        if stray.metadata.deletion_timestamp.is_some() || !bound_to(&stray, claim) {
            continue;
        }
        tracing::info!(claim = %claim_key(claim), handle = %stray.name_any(),
            "a handle bound to the claim is not the one it records: releasing it");
        release(ctx, claim, &stray).await?;
    }
    Ok(())
}

/// What [`bind`] did.
enum Bind {
    Bound(Box<Pending>),
    /// Handles fit, but other claims are ahead in the fair line of the capped pool.
    InLine(Unbound),
    /// No handle fits, or every one that did was taken.
    Nothing,
}

/// Tries the matching unbound handles, best first, each with one JSON patch whose first op
/// tests that `spec.resourceClaim` is still absent (B01): of two binders, in this process or
/// another, exactly one wins; the other gets 422 and tries its next candidate. 404: gone, next.
/// Within this process, a handle is tried by one reconcile at a time (`ClaimIndex::reserve`).
async fn bind(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    resolved: &ResolvedClaim,
    snapshot: &[Arc<HandleObject>],
    now: DateTime<Utc>,
) -> Result<Bind, ClaimError> {
    let index = &ctx.index;
    let operator_namespace = ctx.config.operator_namespace.as_str();
    let handles: Vec<Arc<ResourceHandle>> = snapshot
        .iter()
        .filter(|h| {
            is_bind_candidate(&h.metadata, &h.spec, ctx.domain(), operator_namespace)
                && !index.is_taken(
                    h.metadata.name.as_deref().unwrap_or_default(),
                    h.metadata.resource_version.as_deref(),
                )
        })
        .map(|h| index.view_of(h))
        .collect();
    if handles.is_empty() {
        return Ok(Bind::Nothing);
    }
    let pool_name = requested_pool(&claim.metadata, ctx.domain());
    let candidates =
        resolved.bind_candidates(pool_name, handles.iter().map(|h| h.as_ref()), now)?;
    // A capped pool's free handles go to the claims waiting for it in a fair order.
    if let Some(pool) = pool_name
        && !candidates.is_empty()
        && max_size(ctx, pool).await?.is_some()
        && let Some(waiting) = super::fair_queue::turn(ctx, claim, pool, candidates.len())
    {
        return Ok(Bind::InLine(waiting));
    }
    for candidate in candidates {
        let handle = candidate.handle.clone();
        let name = handle.metadata.name.clone().unwrap_or_default();
        // Another reconcile of this process is binding it, or has just bound it: next.
        if index.is_taken(&name, handle.metadata.resource_version.as_deref()) {
            continue;
        }
        // A search through candidates lost one by one to another process can outlast the
        // snapshot: read the store as it is now. The claim bound meanwhile (by that process):
        // stop, and let the caller adopt its handle. This handle bound or deleting: next,
        // without a request that can only fail.
        if !live_bound_handles(ctx, claim).is_empty() {
            return Ok(Bind::Nothing);
        }
        if ctx
            .stored_handle(&name)
            .is_some_and(|h| !is_free(&h.metadata, &h.spec))
        {
            continue;
        }
        let Some(_reservation) = index.reserve(&name) else {
            continue;
        };
        if let Some(bound) = try_bind(ctx, claim, resolved, handle, now).await? {
            return Ok(Bind::Bound(Box::new(bound)));
        }
    }
    Ok(Bind::Nothing)
}

/// Binds `handle` with its bind patch, retried once with a fresh read when the patch failed
/// on a stale copy of an unbound handle; `None` when the handle cannot be this claim's.
async fn try_bind(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    resolved: &ResolvedClaim,
    mut handle: ResourceHandle,
    now: DateTime<Utc>,
) -> Result<Option<Pending>, ClaimError> {
    let index = &ctx.index;
    let api = ctx.handles_api();
    let name = handle.metadata.name.clone().unwrap_or_default();
    for _ in 0..2 {
        let Some(plan) = bind_plan(ctx, &handle, resolved, now) else {
            return Ok(None);
        };
        let patch = Patch::Json::<()>(plan.patch);
        let written = match write::send_from(&api, &handle, Target::Object, &patch).await {
            Ok(written) => written,
            // An invalid write (a 422 with field causes, not a race): this handle cannot
            // take this claim, the next candidate may.
            Err(kube::Error::Api(status)) if status.code == 422 => {
                tracing::warn!(handle = %name, error = %status, "cannot bind handle: skipped");
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        match written {
            Written::Done(bound) => {
                index.taken(&name, handle.metadata.resource_version.as_deref());
                tracing::info!(claim = %claim_key(claim), handle = %name, "bound claim to handle");
                return Ok(Some(Pending::new(bound, plan.rewrite_requested_end, now)));
            }
            Written::Gone => return Ok(None),
            // Taken, or the stored copy was stale: look again.
            Written::Conflict => {
                ctx.metrics.bind_conflicts.inc();
                let stored_version = ctx
                    .stored_handle(&name)
                    .and_then(|h| h.metadata.resource_version.clone());
                let Some(fresh) = api.get_opt(&name).await? else {
                    return Ok(None);
                };
                if bound_to(&fresh, claim) && fresh.metadata.deletion_timestamp.is_none() {
                    // Another process bound it to this very claim: take it as ours.
                    return Ok(Some(Pending::new(fresh, None, now)));
                }
                if fresh.spec.resource_claim.is_some()
                    || fresh.metadata.deletion_timestamp.is_some()
                {
                    index.taken(&name, stored_version.as_deref());
                    return Ok(None);
                }
                handle = Kinds::handle_of(&fresh);
            }
        }
    }
    Ok(None)
}

/// The bind patch for `handle`; `None` (with a warning) when the handle's lifespan cannot be
/// evaluated for this claim: such a handle is skipped.
fn bind_plan(
    ctx: &ClaimContext,
    handle: &ResourceHandle,
    resolved: &ResolvedClaim,
    now: DateTime<Utc>,
) -> Option<crate::core::binding::bind::BindPlan> {
    let plan = resolved.bind_plan(handle, &ctx.templates, ctx.domain(), now);
    match plan {
        Ok(plan) => Some(plan),
        Err(error) => {
            let name = handle.metadata.name.as_deref().unwrap_or_default();
            tracing::warn!(handle = %name, %error, "cannot bind handle: skipped");
            None
        }
    }
}

/// Creates the claim's handle (§7.2). Its name derives from the claim's uid, so that two
/// processes creating it at once make one handle: the second gets 409 and adopts it.
async fn create(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    resolved: &ResolvedClaim,
    now: DateTime<Utc>,
) -> Result<Outcome, ClaimError> {
    let created = match resolved.new_handle(
        &ctx.templates,
        ctx.domain(),
        &ctx.config.operator_namespace,
        now,
    ) {
        Ok(created) => created,
        Err(e) => return Ok(Outcome::Invalid(e.to_string())),
    };
    let mut handle = created.handle;
    let uid = claim.metadata.uid.as_deref().unwrap_or_default();
    let name = claim_handle_name(uid);
    handle.metadata.name = Some(name.clone());
    let api = ctx.handles_api();
    let handle = ctx.kinds.handle_object(handle);
    let made = match write::create(&api, &handle).await? {
        Written::Done(made) => made,
        Written::Conflict | Written::Gone => {
            if let Some(existing) = api.get_opt(&name).await?
                && bound_to(&existing, claim)
                && existing.metadata.deletion_timestamp.is_none()
            {
                return Ok(Outcome::Bound(Box::new(Pending::new(
                    existing,
                    created.rewrite_requested_end,
                    now,
                ))));
            }
            // Taken by another claim (or a predecessor being deleted): a generated name.
            let mut handle = handle;
            handle.metadata.name = None;
            match write::create(&api, &handle).await? {
                Written::Done(made) => made,
                Written::Conflict | Written::Gone => return Err(ClaimError::NameTaken),
            }
        }
    };
    tracing::info!(
        claim = %claim_key(claim),
        handle = %made.metadata.name.as_deref().unwrap_or_default(),
        "created handle for claim"
    );
    ctx.metrics.handle_created("claim");
    Ok(Outcome::Bound(Box::new(Pending::new(
        made,
        created.rewrite_requested_end,
        now,
    ))))
}

/// Deletes the handles bound to a deleted claim besides `recorded`, each only while
/// it is still bound to the claim: the stored ones, and `just_bound`, one the claim's own
/// reconcile bound (the store may not show that bind yet). The recorded one is the
/// finalizer's own business (§7.3: not when detached).
pub(crate) async fn delete_strays(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    recorded: Option<&str>,
    just_bound: Option<HandleObject>,
) -> Result<(), ClaimError> {
    let api = ctx.handles_api();
    let unrecorded = just_bound.filter(|h| h.metadata.name.as_deref() != recorded);
    let unrecorded_name = unrecorded.as_ref().map(ResourceExt::name_any);
    let stored = strays(ctx, claim, recorded)
        .into_iter()
        .filter(|stray| Some(stray.name_any()) != unrecorded_name);
    for stray in unrecorded.map(Arc::new).into_iter().chain(stored) {
        tracing::info!(claim = %claim_key(claim), handle = %stray.name_any(),
            "deleting a handle bound to the deleted claim that it never recorded");
        write::delete_while(&api, &stray, 3, |h| bound_to(h, claim)).await?;
    }
    Ok(())
}

/// Lets go of `handle`, which `claim` does not record: unbinds it, guarded by a test that it
/// is still bound to this claim (no longer bound: not ours to release), and marks it released
/// ([`unbind_patch`]). Bound for an unknown time, it may have rendered its resources for the
/// claim: it is never bound again, its pool replaces it, and the handle controller deletes it.
pub(crate) async fn release(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    handle: &HandleObject,
) -> Result<(), ClaimError> {
    let name = handle.metadata.name.as_deref().unwrap_or_default();
    let api = ctx.handles_api();
    let patch = Patch::Json::<()>(unbind_patch(
        &Kinds::handle_of(handle),
        &Kinds::claim_of(claim),
        ctx.domain(),
    ));
    match write::send(&api, name, Target::Object, &patch).await? {
        Written::Done(_) => {
            tracing::info!(claim = %claim_key(claim), handle = %name, "released a handle the claim does not record");
        }
        // No longer bound to this claim (a `test` failed), or gone: not ours to release. A
        // stale copy (annotations it does not show) fails too; the claim's next pass, on a
        // fresher store, finds the handle among its strays.
        Written::Conflict | Written::Gone => {}
    }
    Ok(())
}

/// Claim edits reaching the handle (§7 step 11): one JSON patch guarded by the handle's
/// resourceVersion; on conflict, recomputed from a fresh read. Returns the clamped requested
/// end to write back to the claim, or the message of a lifespan that cannot be evaluated.
pub(crate) async fn propagate(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    resolved: &ResolvedClaim,
    handle: HandleObject,
    now: DateTime<Utc>,
) -> Result<Result<Option<DateTime<Utc>>, String>, ClaimError> {
    let domain = ctx.domain();
    let claim_view = Kinds::claim_of(claim);
    let name = handle.metadata.name.clone().unwrap_or_default();
    let api = ctx.handles_api();
    let mut handle = handle;
    for _ in 0..3 {
        let handle_view = Kinds::handle_of(&handle);
        let propagation =
            match resolved.propagation(&claim_view, &handle_view, &ctx.templates, domain, now) {
                Ok(propagation) => propagation,
                Err(e) => return Ok(Err(e.to_string())),
            };
        if propagation.patch.0.is_empty() {
            return Ok(Ok(propagation.rewrite_requested_end));
        }
        match write::patch(&api, &handle, Target::Object, propagation.patch.0).await? {
            Written::Done(_) => return Ok(Ok(propagation.rewrite_requested_end)),
            Written::Gone => return Ok(Ok(None)),
            Written::Conflict => match api.get_opt(&name).await? {
                Some(fresh) => handle = fresh,
                None => return Ok(Ok(None)),
            },
        }
    }
    // Still changing under us: the handle's next change wakes the claim again.
    Ok(Ok(None))
}

pub(crate) fn claim_key(claim: &ClaimObject) -> String {
    let (namespace, name) = super::namespace_and_name(claim);
    format!("{namespace}/{name}")
}

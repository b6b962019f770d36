//! A deleted handle's finalizer (Δ§3.2 Delete, B11): delete each resource it made (marked
//! first unless it goes at once), delete its claim unless detached or already being deleted,
//! wake its pool, then release every Poolboy finalizer (Δ§4.7).

use json_patch::{PatchOperation, TestOperation};
use kube::ResourceExt;
use kube::api::Patch;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use super::{HandleError, get_claim};
use crate::api::kinds::{HandleObject, Kinds};
use crate::api::refs::ResourceReference;
use crate::controller::context::{Context, EventKind};
use crate::controller::managed;
use crate::controller::write::{self, Halt, OrHalt, Target, Written};
use crate::core::handle::definition::status_references;
use crate::core::handle::deletion::{Deletion, deletion};
use crate::core::json::pointer::{add, pointer};

pub(super) async fn finalize(
    object: &HandleObject,
    ctx: &Context,
) -> Result<Action, Halt<HandleError>> {
    let domain = ctx.domain();
    if !object
        .finalizers()
        .iter()
        .any(|f| domain.is_poolboy_finalizer(f))
    {
        return Ok(Action::await_change());
    }
    let handle = Kinds::handle_of(object);
    // Poolboy's timestamp format for the deleted annotation (Δ§2.7).
    let stamp = ctx.now().format("%FT%TZ").to_string();
    // B11: the status references (the legacy spec copy for handles that predate them), and
    // what a pass made before its status write failed on the deletion.
    let handle_uid = object.metadata.uid.as_deref();
    let uid = handle_uid.unwrap_or_default();
    let mut references: Vec<ResourceReference> =
        status_references(&handle).into_iter().flatten().collect();
    for reference in ctx.stores.unrecorded.of(uid) {
        if !references.contains(&reference) {
            references.push(reference);
        }
    }
    for reference in &references {
        delete_resource(ctx, reference, handle_uid, &stamp).await?;
    }
    ctx.stores.unrecorded.forget(uid);

    // A claim already being deleted needs no deletion, nor an Event saying that this handle's
    // deletion deletes it: most often the claim's own finalizer is what deleted this handle,
    // and then it is known without a look (`store::deleted_by_claims`).
    if let Some(reference) = &handle.spec.resource_claim
        && !ctx.stores.deleted_by_claims.contains(uid)
        && let Some(claim) = get_claim(ctx, reference).await?
        && claim.metadata.deletion_timestamp.is_none()
    {
        let detached = claim
            .status
            .as_ref()
            .and_then(|s| s.resource_handle.as_ref())
            .and_then(|h| h.detached)
            == Some(true);
        if !detached {
            tracing::info!(handle = %object.name_any(), claim = %reference.name, "deleting the bound ResourceClaim");
            let note = format!(
                "ResourceHandle {} was deleted: deleting the claim",
                object.name_any()
            );
            let claim_object = ctx.kinds.claim_object(claim.clone());
            ctx.event(
                &claim_object,
                &ctx.kinds.claim,
                EventKind::Normal,
                "HandleDeleted",
                note,
            )
            .await;
            let api = ctx.claims_api(&reference.namespace);
            write::delete_named(&api, &reference.name).await?;
        }
    }
    if let Some(pool) = &handle.spec.resource_pool {
        let pool_ref =
            ObjectRef::new_with(&pool.name, ctx.kinds.pool.clone()).within(&pool.namespace);
        let _ = ctx.triggers.pools.unbounded_send(pool_ref);
    }

    let ours = |f: &str| domain.is_poolboy_finalizer(f);
    write::release_finalizers(&ctx.handles_api(), object, ours)
        .await
        .or_halt()?;
    ctx.stores.deleted_by_claims.forget(uid);
    Ok(Action::await_change())
}

/// Deletes the resource, marked as deleted by Poolboy (its watch events are then ignored, B12)
/// unless it goes at once (`core::handle::deletion`). A resource, or a kind, that no longer
/// exists is done. So is one that another handle of the same name made (its
/// `D/resource-handle-uid` is not `handle_uid`): a process finalizing from a stale copy, after
/// the handle was gone and a namesake made for the same claim had created the resource again,
/// must not take it away (its deletion would go unseen, B12). Every write carries the
/// resource's uid, so that it reaches the object checked.
async fn delete_resource(
    ctx: &Context,
    reference: &ResourceReference,
    handle_uid: Option<&str>,
    stamp: &str,
) -> Result<(), HandleError> {
    let api = match managed::api_for(ctx, reference).await {
        Ok(api) => api,
        Err(error) if write::is_not_found(&error) => return Ok(()),
        Err(error) => return Err(error.into()),
    };
    // Once its store shows this process's last write of it: a copy that write replaced would
    // fail the one-request delete's resourceVersion precondition, and cost three requests.
    let Some(live) = managed::caught_up_state(ctx, reference).await? else {
        return Ok(());
    };
    let resource_uid = live.pointer("/metadata/uid").and_then(Value::as_str);
    let owner = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ctx.domain().resource_handle_uid()))
        .and_then(Value::as_str);
    if let (Some(owner), Some(ours)) = (owner, handle_uid)
        && owner != ours
    {
        tracing::info!(kind = %reference.kind, name = %reference.name,
            "not deleting a managed resource of another handle of the same name");
        return Ok(());
    }
    tracing::info!(kind = %reference.kind, name = %reference.name, "deleting managed resource");
    let annotate = annotation(ctx, &live, resource_uid, stamp);
    if let Deletion::AtOnce {
        uid,
        resource_version,
    } = deletion(&live)
    {
        match write::delete_unchanged(&api, &reference.name, uid, resource_version).await? {
            Written::Done(None) | Written::Gone => return Ok(()),
            // It stays after all (a finalizer the copy did not show): it is marked now.
            Written::Done(Some(_)) => {
                write::send(&api, &reference.name, Target::Object, &annotate).await?;
                return Ok(());
            }
            // Changed since it was read: marked first, as any other.
            Written::Conflict => {}
        }
    }
    // Gone, or (the uid test failed) replaced since it was read: not the one to delete.
    if let Written::Conflict | Written::Gone =
        write::send(&api, &reference.name, Target::Object, &annotate).await?
    {
        return Ok(());
    }
    write::delete_uid(&api, &reference.name, resource_uid).await?;
    Ok(())
}

/// The patch that marks `live` as deleted by Poolboy at `stamp`, for `live` only (a test of
/// its `uid`).
fn annotation(ctx: &Context, live: &Value, uid: Option<&str>, stamp: &str) -> Patch<()> {
    let key = ctx.domain().resource_handle_deleted();
    let mut ops = Vec::new();
    if let Some(uid) = uid {
        ops.push(PatchOperation::Test(TestOperation {
            path: pointer(&["metadata", "uid"]),
            value: json!(uid),
        }));
    }
    ops.push(
        if live
            .pointer("/metadata/annotations")
            .is_some_and(Value::is_object)
        {
            add(&["metadata", "annotations", &key], json!(stamp))
        } else {
            add(&["metadata", "annotations"], json!({ key: stamp }))
        },
    );
    Patch::Json(json_patch::Patch(ops))
}

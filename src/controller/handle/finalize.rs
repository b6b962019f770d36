//! A deleted handle's finalizer (Δ§3.2 Delete, B11): annotate and delete each resource it
//! made, delete its claim unless detached, wake its pool, then release every Poolboy
//! finalizer (Δ§4.7).

use json_patch::{PatchOperation, TestOperation};
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use super::{HandleError, Pass, get_claim};
use crate::api::kinds::{HandleObject, Kinds};
use crate::api::refs::ResourceReference;
use crate::controller::context::{Context, EventKind};
use crate::controller::managed;
use crate::controller::write::{self, Written};
use crate::core::handle::definition::status_references;
use crate::core::json::pointer::{add, pointer};

pub(super) async fn finalize(object: &HandleObject, ctx: &Context) -> Result<Pass, HandleError> {
    let domain = ctx.domain();
    if !object
        .finalizers()
        .iter()
        .any(|f| domain.is_poolboy_finalizer(f))
    {
        return Ok(Pass::Done(Action::await_change()));
    }
    let handle = Kinds::handle_of(object);
    // Poolboy's timestamp format for the deleted annotation (Δ§2.7).
    let stamp = ctx.now().format("%FT%TZ").to_string();
    // B11: the status references (the legacy spec copy for handles that predate them).
    let uid = object.metadata.uid.as_deref();
    for reference in status_references(&handle).into_iter().flatten() {
        delete_resource(ctx, &reference, uid, &stamp).await?;
    }

    if let Some(reference) = &handle.spec.resource_claim
        && let Some(claim) = get_claim(ctx, reference).await?
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
            match ctx
                .claims_api(&reference.namespace)
                .delete(&reference.name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(error) if write::is_not_found(&error) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
    if let Some(pool) = &handle.spec.resource_pool {
        let pool_ref =
            ObjectRef::new_with(&pool.name, ctx.kinds.pool.clone()).within(&pool.namespace);
        let _ = ctx.triggers.pools.unbounded_send(pool_ref);
    }

    let ours = |f: &str| domain.is_poolboy_finalizer(f);
    Ok(
        match write::release_finalizers(&ctx.handles_api(), object, ours).await? {
            Written::Done(_) => Pass::Done(Action::await_change()),
            Written::Conflict => Pass::Conflict,
            // Already gone (another process finalized it).
            Written::Gone => Pass::Done(Action::await_change()),
        },
    )
}

/// Marks the resource as being deleted by Poolboy (its watch events are then ignored, B12) and
/// deletes it. A resource, or a kind, that no longer exists is done. So is one that another
/// handle of the same name made (its `D/resource-handle-uid` is not `handle_uid`): a process
/// finalizing from a stale copy, after the handle was gone and a namesake made for the same
/// claim had created the resource again, must not take it away (its deletion would go unseen,
/// B12). Both writes carry the resource's uid, so that they reach the object checked.
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
    let Some(live) = managed::live_state(ctx, reference).await? else {
        return Ok(());
    };
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
    let resource_uid = live.pointer("/metadata/uid").and_then(Value::as_str);
    let key = ctx.domain().resource_handle_deleted();
    let mut ops = Vec::new();
    if let Some(uid) = resource_uid {
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
    let annotated = api
        .patch(
            &reference.name,
            &PatchParams::default(),
            &Patch::Json::<()>(json_patch::Patch(ops)),
        )
        .await;
    match annotated {
        Ok(_) => {}
        // Gone, or (the uid test failed) replaced since it was read: not the one to delete.
        Err(error) if write::is_not_found(&error) || write::is_conflict(&error) => return Ok(()),
        Err(error) => return Err(error.into()),
    }
    tracing::info!(kind = %reference.kind, name = %reference.name, "deleting managed resource");
    let params = DeleteParams {
        preconditions: resource_uid.map(|uid| Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&reference.name, &params).await {
        Ok(_) => Ok(()),
        Err(error) if write::is_not_found(&error) || write::is_conflict(&error) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

//! Admission reviews of claims: a create or update of a ResourceClaim,
//! checked by [`admit_claim`] (the claim controller's own validation) against the providers
//! this process knows. Whatever keeps the check from being made lets the claim in: the claim
//! controller validates it anyway and says so in its status, so the check can only ever move a
//! refusal earlier, never refuse what the broker would accept.

use std::time::Duration;

use kube::api::Api;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::runtime::reflector::ObjectRef;

use crate::api::claim::ClaimHandleRef;
use crate::api::kinds::{ClaimObject, HandleObject, Kinds};
use crate::controller::context::Context;
use crate::core::claim::admission::{AdmissionInput, Verdict, admit_claim};
use crate::store::packed::Packed;

/// How long a review waits to read a bound handle the store does not hold: well within the
/// API server's wait for the review (the chart's `timeoutSeconds`, 5 s).
const HANDLE_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a claim was let in without a check.
#[derive(Debug, thiserror::Error)]
enum Unchecked {
    #[error("the ResourceProviders are not listed yet")]
    ProvidersNotListed,
    #[error("not a ResourceClaim")]
    NotAClaim,
    #[error("cannot read the claim: {0}")]
    Undecodable(#[source] kube::core::dynamic::ParseDynamicObjectError),
    #[error("cannot read ResourceHandle {namespace}/{name}: {source}")]
    Handle {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("ResourceHandle {namespace}/{name} not read within {HANDLE_READ_TIMEOUT:?}")]
    HandleTimeout { namespace: String, name: String },
}

/// Answers one admission review: allowed (perhaps with warnings) or denied with the message the
/// claim's status would get.
pub(crate) async fn review(
    ctx: &Context,
    request: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    let operation = match request.operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        // Only creates and updates are sent (the webhook configuration's rules).
        _ => return AdmissionResponse::from(request),
    };
    let response = AdmissionResponse::from(request);
    let (result, response) = match check(ctx, request).await {
        Ok(Verdict::Allowed { warnings }) if warnings.is_empty() => ("allowed", response),
        Ok(Verdict::Allowed { warnings }) => {
            let mut response = response;
            response.warnings = Some(warnings);
            ("warned", response)
        }
        Ok(Verdict::Denied(message)) => {
            tracing::debug!(claim = %key(request), %message, "admission denied");
            let mut response = response.deny(&message);
            // What the API server would answer for a field it refuses itself.
            response.result = kube::core::Status::failure(&message, "Invalid").with_code(422);
            ("denied", response)
        }
        Err(why) => {
            tracing::debug!(claim = %key(request), %why, "admission allowed without a check");
            ("unchecked", response)
        }
    };
    tracing::debug!(claim = %key(request), operation, result, user = ?request.user_info.username, "admission review");
    ctx.metrics.admission_review(operation, result);
    response
}

async fn check(
    ctx: &Context,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<Verdict, Unchecked> {
    let is_claim = request.kind.group == ctx.kinds.claim.group
        && request.kind.kind == ctx.kinds.claim.kind
        && request.sub_resource.is_none();
    let object = request.object.clone().filter(|_| is_claim);
    let Some(object) = object else {
        return Err(Unchecked::NotAClaim);
    };
    if !ctx.providers_listed() {
        return Err(Unchecked::ProvidersNotListed);
    }
    let claim = Kinds::claim_of(&parse(object)?);
    let old = match request.old_object.clone() {
        Some(old) => Some(Kinds::claim_of(&parse(old)?)),
        None => None,
    };
    let bound = claim
        .status
        .as_ref()
        .and_then(|s| s.resource_handle.as_ref());
    let handle = match bound {
        Some(reference) => bound_handle(ctx, reference).await?,
        None => None,
    };
    let handle = handle.as_ref().map(Kinds::handle_of);
    Ok(ctx.providers(|catalog| {
        admit_claim(&AdmissionInput {
            claim: &claim,
            old: old.as_ref(),
            handle: handle.as_ref(),
            catalog,
            templates: &ctx.templates,
            domain: ctx.domain(),
            now: ctx.now(),
        })
    }))
}

fn parse(object: DynamicObject) -> Result<ClaimObject, Unchecked> {
    object.try_parse().map_err(Unchecked::Undecodable)
}

/// The claim's bound handle: from the handle store when this process watches handles (it holds
/// the Lease), else read. `None` when it is gone.
async fn bound_handle(
    ctx: &Context,
    reference: &ClaimHandleRef,
) -> Result<Option<HandleObject>, Unchecked> {
    let key = ObjectRef::new_with(&reference.name, ctx.kinds.stored_handle.clone())
        .within(&reference.namespace);
    if let Some(handle) = Packed::read(ctx.stores.handles.store(), &key) {
        return Ok(Some(handle));
    }
    let api = Api::<HandleObject>::namespaced_with(
        ctx.client.clone(),
        &reference.namespace,
        &ctx.kinds.handle,
    );
    match tokio::time::timeout(HANDLE_READ_TIMEOUT, api.get_opt(&reference.name)).await {
        Ok(read) => read.map_err(|source| Unchecked::Handle {
            namespace: reference.namespace.clone(),
            name: reference.name.clone(),
            source,
        }),
        Err(_) => Err(Unchecked::HandleTimeout {
            namespace: reference.namespace.clone(),
            name: reference.name.clone(),
        }),
    }
}

fn key(request: &AdmissionRequest<DynamicObject>) -> String {
    format!(
        "{}/{}",
        request.namespace.as_deref().unwrap_or_default(),
        request.name
    )
}

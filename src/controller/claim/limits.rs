//! A provider's `maxClaimsPerNamespace`, checked before a claim binds or
//! gets a handle of its own. The claims counted are those the claim store shows holding a
//! handle through the provider, plus those this process let through a moment ago whose
//! handle the store does not show yet ([`ClaimIndex::admit`](crate::store::claim_index::ClaimIndex::admit)):
//! two claims of one namespace reconciled at once cannot both take the last place.

use kube::runtime::reflector::ObjectRef;

use super::ClaimContext;
use crate::api::kinds::ClaimObject;
use crate::core::claim::limits::limits_of;
use crate::core::claim::resolve::ResolvedClaim;
use crate::core::claim::status::Unbound;

/// `None` when the claim may hold a handle through each of its providers; otherwise the limit
/// it waits for.
pub(crate) fn admit(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    resolved: &ResolvedClaim,
) -> Option<Unbound> {
    let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    for (provider, limit) in limits_of(resolved) {
        let (active, alive) = ctx.stores.claim_summaries.holding(namespace, provider);
        let limit_count = usize::try_from(limit).unwrap_or(0);
        let index = &ctx.index;
        if !index.admit(namespace, provider, name, limit_count, &active, &alive) {
            return Some(Unbound::OverLimit {
                provider: provider.to_owned(),
                limit,
                namespace: namespace.to_owned(),
            });
        }
    }
    None
}

/// Wakes the claims of `namespace` that wait (for a limit, among others): a claim of theirs
/// is going.
pub(crate) fn wake_waiting(ctx: &ClaimContext, namespace: &str) {
    for (waiting_namespace, name) in ctx.index.waiting() {
        if waiting_namespace == namespace {
            let claim =
                ObjectRef::new_with(&name, ctx.kinds.stored_claim.clone()).within(namespace);
            // Closed only when the operator stops.
            let _ = ctx.triggers.claims.unbounded_send(claim);
        }
    }
}

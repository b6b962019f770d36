//! Which objects a provider change concerns: the claims, handles and pools to reconcile again
//! when a provider appears, changes or goes. On the parts of an object, so that a controller
//! can sift its stores without converting every object.

use crate::api::claim::{ResourceClaimSpec, ResourceClaimStatus};
use crate::api::handle::ResourceHandleSpec;
use crate::api::pool::ResourcePoolSpec;

/// Whether a change of provider `name` concerns a claim: the claim names it (`spec.provider`,
/// a resource's `provider`) or was assigned it (`status.resources[].provider`, §6.2); or the
/// claim is unbound, and may be waiting for this provider to appear or to match its template.
pub(crate) fn concerns_claim(
    spec: &ResourceClaimSpec,
    status: Option<&ResourceClaimStatus>,
    name: &str,
) -> bool {
    let named = spec.provider.as_ref().is_some_and(|p| p.name == name)
        || spec
            .resources
            .iter()
            .flatten()
            .any(|r| r.provider.as_ref().is_some_and(|p| p.name == name));
    let assigned = status
        .and_then(|s| s.resources.as_ref())
        .into_iter()
        .flatten()
        .any(|r| r.provider.as_ref().is_some_and(|p| p.name == name));
    let unbound = status.and_then(|s| s.resource_handle.as_ref()).is_none();
    named || assigned || unbound
}

/// Whether a change of provider `name` concerns a handle: `spec.provider` or a resource's
/// provider names it.
pub(crate) fn concerns_handle(spec: &ResourceHandleSpec, name: &str) -> bool {
    spec.provider.as_ref().is_some_and(|p| p.name == name)
        || spec
            .resources
            .iter()
            .flatten()
            .any(|r| r.provider.name == name)
}

/// Whether a change of provider `name` concerns a pool: its handles take that provider's
/// lifespan, and a pool whose provider is missing waits for it.
pub(crate) fn concerns_pool(spec: &ResourcePoolSpec, name: &str) -> bool {
    spec.provider.as_ref().is_some_and(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::test_fixtures::{claim, handle, pool};

    const BOUND: &str = "resourceHandle: {apiVersion: poolboy.gpte.redhat.com/v1, \
                         kind: ResourceHandle, name: guid-abcde, namespace: poolboy}";

    #[test]
    fn a_claim_is_concerned_by_the_providers_it_names_or_was_assigned() {
        let named = claim(&format!(
            "metadata: {{name: c}}\nspec: {{provider: {{name: lab}}}}\nstatus: {{{BOUND}}}"
        ));
        assert!(concerns_claim(&named.spec, named.status.as_ref(), "lab"));
        assert!(!concerns_claim(&named.spec, named.status.as_ref(), "other"));

        let assigned = claim(&format!(
            "metadata: {{name: c}}\nspec: {{resources: [{{template: {{}}}}]}}\n\
             status: {{{BOUND}, resources: [{{provider: {{apiVersion: poolboy.gpte.redhat.com/v1, \
             kind: ResourceProvider, name: matched, namespace: poolboy}}}}]}}"
        ));
        assert!(concerns_claim(
            &assigned.spec,
            assigned.status.as_ref(),
            "matched"
        ));
        assert!(!concerns_claim(
            &assigned.spec,
            assigned.status.as_ref(),
            "other"
        ));
    }

    #[test]
    fn an_unbound_claim_is_concerned_by_every_provider() {
        let unbound = claim("metadata: {name: c}\nspec: {resources: [{template: {}}]}");
        assert!(concerns_claim(
            &unbound.spec,
            unbound.status.as_ref(),
            "anything"
        ));
    }

    #[test]
    fn handles_and_pools_are_concerned_by_the_providers_they_name() {
        let resources = handle(
            "metadata: {name: guid-abcde}\nspec: {resources: [{provider: {apiVersion: \
             poolboy.gpte.redhat.com/v1, kind: ResourceProvider, name: lab, namespace: poolboy}}]}",
        );
        assert!(concerns_handle(&resources.spec, "lab"));
        assert!(!concerns_handle(&resources.spec, "other"));
        let generated = handle("metadata: {name: guid-abcde}\nspec: {provider: {name: top}}");
        assert!(concerns_handle(&generated.spec, "top"));

        let gold = pool("metadata: {name: gold}\nspec: {minAvailable: 1, provider: {name: lab}}");
        assert!(concerns_pool(&gold.spec, "lab"));
        assert!(!concerns_pool(&gold.spec, "other"));
    }
}

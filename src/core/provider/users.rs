//! Which objects a provider change concerns: the claims, handles and pools to reconcile again
//! when a provider appears, changes or goes. On the parts of an object, so that a controller
//! can sift its stores without converting every object.

use crate::api::claim::{ResourceClaimSpec, ResourceClaimStatus};
use crate::api::handle::ResourceHandleSpec;
use crate::api::pool::ResourcePoolSpec;

/// What a provider change needs to know of a claim: the providers it names (`spec.provider`,
/// a resource's `provider`) or was assigned (`status.resources[].provider`, §6.2), and whether
/// it is unbound (it may be waiting for any provider to appear or to match its template).
/// Kept beside the claim store, which holds claims packed, so that a change is sifted without
/// decoding every claim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ClaimProviders {
    named: Box<[String]>,
    unbound: bool,
}

impl ClaimProviders {
    pub(crate) fn of(spec: &ResourceClaimSpec, status: Option<&ResourceClaimStatus>) -> Self {
        let mut named: Vec<String> = spec.provider.iter().map(|p| p.name.clone()).collect();
        let resources = spec.resources.iter().flatten();
        named.extend(resources.filter_map(|r| Some(r.provider.as_ref()?.name.clone())));
        let assigned = status
            .and_then(|s| s.resources.as_ref())
            .into_iter()
            .flatten();
        named.extend(assigned.filter_map(|r| Some(r.provider.as_ref()?.name.clone())));
        named.sort_unstable();
        named.dedup();
        Self {
            named: named.into(),
            unbound: status.and_then(|s| s.resource_handle.as_ref()).is_none(),
        }
    }

    /// Whether a change of provider `name` concerns the claim.
    pub(crate) fn concern(&self, name: &str) -> bool {
        self.unbound || self.named.iter().any(|named| named == name)
    }
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
        assert!(ClaimProviders::of(&named.spec, named.status.as_ref()).concern("lab"));
        assert!(!ClaimProviders::of(&named.spec, named.status.as_ref()).concern("other"));

        let assigned = claim(&format!(
            "metadata: {{name: c}}\nspec: {{resources: [{{template: {{}}}}]}}\n\
             status: {{{BOUND}, resources: [{{provider: {{apiVersion: poolboy.gpte.redhat.com/v1, \
             kind: ResourceProvider, name: matched, namespace: poolboy}}}}]}}"
        ));
        assert!(ClaimProviders::of(&assigned.spec, assigned.status.as_ref()).concern("matched"));
        assert!(!ClaimProviders::of(&assigned.spec, assigned.status.as_ref()).concern("other"));
    }

    #[test]
    fn an_unbound_claim_is_concerned_by_every_provider() {
        let unbound = claim("metadata: {name: c}\nspec: {resources: [{template: {}}]}");
        assert!(ClaimProviders::of(&unbound.spec, unbound.status.as_ref()).concern("anything"));
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

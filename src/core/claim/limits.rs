//! Per-namespace claim limits of providers (not in Poolboy): a provider's
//! `maxClaimsPerNamespace` caps the claims of one namespace that hold a handle through it.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::claim::ResourceClaimStatus;
use crate::core::claim::resolve::ResolvedClaim;

/// The limits that apply to a claim: `(provider, maxClaimsPerNamespace)` of each of its
/// providers that sets one, each provider once.
pub(crate) fn limits_of(resolved: &ResolvedClaim) -> Vec<(&str, i64)> {
    let mut limits: Vec<(&str, i64)> = resolved
        .providers()
        .filter_map(|p| Some((p.name(), p.spec().max_claims_per_namespace?)))
        .collect();
    limits.sort_unstable();
    limits.dedup();
    limits
}

/// The providers a claim's status says it uses (§7.4): `status.provider` and the provider of
/// each `status.resources` entry.
pub(crate) fn providers_of(status: &ResourceClaimStatus) -> BTreeSet<&str> {
    let mut names: BTreeSet<&str> = status.provider.iter().map(|p| p.name.as_str()).collect();
    for resource in status.resources.iter().flatten() {
        if let Some(provider) = &resource.provider {
            names.insert(provider.name.as_str());
        }
    }
    names
}

/// The providers whose limits the claim of `metadata` and `status` counts against: those it
/// uses ([`providers_of`]) while it holds a handle (`status.resourceHandle`) and is not being
/// deleted; none otherwise.
pub(crate) fn held_through(
    metadata: &ObjectMeta,
    status: Option<&ResourceClaimStatus>,
) -> Vec<String> {
    match status {
        Some(status)
            if metadata.deletion_timestamp.is_none() && status.resource_handle.is_some() =>
        {
            providers_of(status)
                .into_iter()
                .map(str::to_owned)
                .collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::ResourceClaim;

    fn claim(status: serde_json::Value, deleting: bool) -> ResourceClaim {
        let mut value = json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "user"},
            "spec": {}, "status": status,
        });
        if deleting {
            value["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(value).expect("claim")
    }

    #[test]
    fn a_claim_counts_against_the_providers_it_holds_a_handle_through() {
        let handle = json!({"apiVersion": "poolboy.gpte.redhat.com/v1",
            "kind": "ResourceHandle", "name": "guid-a", "namespace": "poolboy"});
        let bound = claim(
            json!({"resourceHandle": handle, "provider": {"name": "lab"},
                   "resources": [{"provider": {"name": "cm"}}]}),
            false,
        );
        assert_eq!(
            held_through(&bound.metadata, bound.status.as_ref()),
            ["cm", "lab"]
        );
        let waiting = claim(json!({"provider": {"name": "lab"}}), false);
        assert!(
            held_through(&waiting.metadata, waiting.status.as_ref()).is_empty(),
            "no handle yet"
        );
        let going = claim(
            json!({"resourceHandle": handle, "provider": {"name": "lab"}}),
            true,
        );
        assert!(
            held_through(&going.metadata, going.status.as_ref()).is_empty(),
            "being deleted"
        );
    }
}

//! The ResourceHandles the broker creates: for a claim that no pooled handle fits (§7.2) and
//! for a pool that is short of handles (§11 step 5, Δ§3.3).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use serde_json::{Map, Value};

use crate::api::handle::{HandleResource, ResourceHandleSpec};
use crate::api::refs::LifespanSettings;
use crate::api::refs::{ObjectRef, ProviderParameters};
use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle, ResourcePool};
use crate::core::handle::desired::DesiredResource;
use crate::core::lifespan::interval::parse_interval;
use crate::core::lifespan::{self, EvaluatedLifespan, LifespanError};
use crate::core::naming::HANDLE_GENERATE_NAME;

/// A handle to create for a claim, and what to write back to the claim.
#[derive(Debug, Clone)]
pub(crate) struct HandleForClaim {
    pub handle: ResourceHandle,
    /// When set, the claim's `spec.lifespan.end` is rewritten to this clamped end (the fix for
    /// the sliding end of §10.4).
    pub rewrite_requested_end: Option<DateTime<Utc>>,
}

/// What a handle for a claim holds: the provider claim's effective provider and values
/// (Δ B20), or nothing for a resources claim.
pub(crate) struct ClaimHandleInput<'a> {
    pub claim: &'a ResourceClaim,
    /// `spec.provider` with the effective parameter values, for provider claims.
    pub provider: Option<ProviderParameters>,
    /// The claim's resources with their providers and templates (defaults applied).
    pub resources: &'a [DesiredResource],
    /// The lifespan of each provider of the claim, evaluated for it.
    pub lifespans: &'a [EvaluatedLifespan],
}

/// The handle created for a claim (§7.2): `generateName: guid-`, the finalizer, the claim
/// labels and reference, the resources, and the lifespan (minimum across providers, §10.5).
pub(crate) fn handle_for_claim(
    input: &ClaimHandleInput<'_>,
    domain: &OperatorDomain,
    operator_namespace: &str,
    now: DateTime<Utc>,
) -> Result<HandleForClaim, LifespanError> {
    let claim = input.claim;
    let lifespan = lifespan::new_claim_handle_lifespan(claim, input.lifespans, now)?;
    let labels = BTreeMap::from([
        (domain.resource_claim_name(), claim.name_any()),
        (
            domain.resource_claim_namespace(),
            claim.namespace().unwrap_or_default(),
        ),
    ]);
    let resources = input
        .resources
        .iter()
        .map(|r| HandleResource {
            name: Some(r.name.clone()).filter(|n| !n.is_empty()),
            provider: r.provider.clone(),
            reference: None,
            template: Some(r.template.clone()).filter(|t| !is_empty_object(t)),
        })
        .collect();
    let handle = ResourceHandle {
        metadata: new_handle_metadata(domain, operator_namespace, labels),
        spec: ResourceHandleSpec {
            lifespan: lifespan.lifespan,
            provider: input.provider.clone(),
            resource_claim: Some(claim_reference(claim, domain)),
            resources: Some(resources),
            ..Default::default()
        },
        status: None,
    };
    Ok(HandleForClaim {
        handle,
        rewrite_requested_end: lifespan.rewrite_request,
    })
}

/// The handle a pool creates (§11 step 5, Δ§3.3): pool labels (and the scaling's, when one
/// is active), the pool reference, the pool's vars, provider or resources, preferenceScore,
/// resource labels and annotations, and the lifespan of the pool, else of its provider.
pub(crate) fn handle_for_pool(
    pool: &ResourcePool,
    provider_lifespan: Option<&LifespanSettings>,
    scaling: Option<&str>,
    domain: &OperatorDomain,
    now: DateTime<Utc>,
) -> Result<ResourceHandle, LifespanError> {
    let spec = &pool.spec;
    let pool_namespace = pool.namespace().unwrap_or_default();
    let mut labels = BTreeMap::from([
        (domain.resource_pool_name(), pool.name_any()),
        (domain.resource_pool_namespace(), pool_namespace.clone()),
    ]);
    if let Some(scaling) = scaling {
        labels.insert(domain.resource_pool_scaling_name(), scaling.to_owned());
    }
    let provider_lifespan = spec.provider.as_ref().and(provider_lifespan);
    let lifespan =
        lifespan::new_pool_handle_lifespan(spec.lifespan.as_ref(), provider_lifespan, now, |s| {
            parse_interval(s)
        })?;
    let resources = spec.resources.as_ref().map(|resources| {
        resources
            .iter()
            .map(|r| HandleResource {
                name: r.name.clone(),
                provider: r.provider.clone(),
                reference: None,
                template: r.template.clone(),
            })
            .collect()
    });
    Ok(ResourceHandle {
        metadata: new_handle_metadata(domain, &pool_namespace, labels),
        spec: ResourceHandleSpec {
            lifespan,
            preference_score: spec.preference_score,
            provider: spec.provider.clone(),
            resource_annotations: spec.resource_annotations.clone(),
            resource_labels: spec.resource_labels.clone(),
            resource_pool: Some(ObjectRef {
                api_version: domain.api_version(),
                kind: "ResourcePool".to_owned(),
                name: pool.name_any(),
                namespace: pool_namespace,
            }),
            resources,
            vars: spec.vars.clone(),
            ..Default::default()
        },
        status: None,
    })
}

/// `{apiVersion: D/v1, kind: ResourceClaim, name, namespace}`.
pub(crate) fn claim_reference(claim: &ResourceClaim, domain: &OperatorDomain) -> ObjectRef {
    ObjectRef {
        api_version: domain.api_version(),
        kind: "ResourceClaim".to_owned(),
        name: claim.name_any(),
        namespace: claim.namespace().unwrap_or_default(),
    }
}

/// Every new handle: `generateName: guid-` and the finalizer from the start, so that no
/// handle exists for a moment without it (Poolboy adds it on first handling, §11 step 5).
fn new_handle_metadata(
    domain: &OperatorDomain,
    namespace: &str,
    labels: BTreeMap<String, String>,
) -> ObjectMeta {
    ObjectMeta {
        generate_name: Some(HANDLE_GENERATE_NAME.to_owned()),
        namespace: Some(namespace.to_owned()),
        finalizers: Some(vec![domain.finalizer()]),
        labels: Some(labels),
        ..Default::default()
    }
}

fn is_empty_object(value: &Value) -> bool {
    value.as_object().is_some_and(Map::is_empty)
}

#[cfg(test)]
mod tests;

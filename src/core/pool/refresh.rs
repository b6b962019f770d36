//! Rolling refresh of a pool's unbound handles (not in Poolboy, which keeps old unbound
//! handles until their unclaimed lifespan ends): each handle a pool makes carries
//! the pool's *version*, a digest of what a new handle takes from the pool and of the
//! providers it names. An unbound handle of another version is stale; the pool plan
//! ([`super::plan::plan_pool`]) makes current replacements under its caps and deletes a stale
//! handle once a current one is ready to take its place. Bound handles are never touched.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::api::handle::ResourceHandleSpec;
use crate::api::pool::ResourcePoolStatus;
use crate::api::{OperatorDomain, ResourceHandle};
use crate::core::conditions::{Change, ConditionStatus, DesiredCondition, set_condition};
use crate::core::provider::ProviderCatalog;

/// The pool condition that says whether every unbound handle is of the pool's version.
pub(crate) const HANDLES_UP_TO_DATE: &str = "HandlesUpToDate";

/// Hex digits of the digest kept: enough that two versions of one pool never collide.
const VERSION_LENGTH: usize = 16;

/// What a handle takes from its pool (`core::handle::new::handle_for_pool` copies it) and what
/// makes its resources: the provider and its parameters, or the resource templates when there
/// is no provider (a provider's handle writes its generated resources into `spec.resources`, so
/// they are not compared), the vars, and the labels and annotations of its resources.
///
/// It is read the way Poolboy reads a handle, so that a handle Poolboy made for an unchanged
/// pool has the pool's version (docs/compatibility.md, "Pool versions"): an empty map, list or
/// template is absent (Poolboy reads each with an empty default and writes `vars: {}` for a
/// pool without vars), and a provider is known by its name alone (Poolboy looks providers up
/// by name in its own namespace). The normal form is what this broker writes for a pool that
/// leaves those fields out, so the versions it stamped stay valid.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HandleContent<'a> {
    provider: Option<ProviderContent<'a>>,
    resources: Option<Vec<ResourceContent<'a>>>,
    vars: Option<&'a Map<String, Value>>,
    resource_labels: Option<&'a BTreeMap<String, String>>,
    resource_annotations: Option<&'a BTreeMap<String, String>>,
}

/// `spec.provider` as [`crate::api::refs::ProviderParameters`] serialises it, without empty
/// parameter values.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProviderContent<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameter_values: Option<&'a Map<String, Value>>,
}

#[derive(Serialize)]
struct ResourceContent<'a> {
    name: Option<&'a str>,
    provider: ProviderReference<'a>,
    template: Option<&'a Value>,
}

/// A provider reference in the one form a provider of `name` is found by: the operator's
/// group and version, in the operator namespace (where the handle lives).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProviderReference<'a> {
    api_version: &'a str,
    kind: &'static str,
    name: &'a str,
    namespace: &'a str,
}

/// A template that renders something: `{}` and null are no template (Poolboy reads an
/// absent one as `{}`).
fn template_content(template: Option<&Value>) -> Option<&Value> {
    template.filter(|t| !(t.is_null() || t.as_object().is_some_and(Map::is_empty)))
}

impl<'a> HandleContent<'a> {
    /// The content of `handle`, whose provider references are in the operator's `api_version`.
    fn of_handle(handle: &'a ResourceHandle, api_version: &'a str) -> Self {
        let spec = &handle.spec;
        let namespace = handle.metadata.namespace.as_deref().unwrap_or_default();
        let resources = spec
            .resources
            .as_ref()
            .filter(|resources| !resources.is_empty() && spec.provider.is_none())
            .map(|resources| {
                resources
                    .iter()
                    .map(|r| ResourceContent {
                        name: r.name.as_deref(),
                        provider: ProviderReference {
                            api_version,
                            kind: "ResourceProvider",
                            name: &r.provider.name,
                            namespace,
                        },
                        template: template_content(r.template.as_ref()),
                    })
                    .collect()
            });
        Self {
            provider: spec.provider.as_ref().map(|p| ProviderContent {
                name: &p.name,
                parameter_values: p.parameter_values.as_ref().filter(|m| !m.is_empty()),
            }),
            resources,
            vars: spec.vars.as_ref().filter(|m| !m.is_empty()),
            resource_labels: spec.resource_labels.as_ref().filter(|m| !m.is_empty()),
            resource_annotations: spec.resource_annotations.as_ref().filter(|m| !m.is_empty()),
        }
    }
}

/// The names of the providers a handle's content uses, each once: its provider, or else those
/// of its resources.
fn provider_names(spec: &ResourceHandleSpec) -> BTreeSet<&str> {
    match &spec.provider {
        Some(provider) => BTreeSet::from([provider.name.as_str()]),
        None => spec
            .resources
            .iter()
            .flatten()
            .map(|r| r.provider.name.as_str())
            .collect(),
    }
}

/// The digest of `handle`'s content with the spec of each provider it names (`providers`, by
/// name; a missing one digests as null, so its arrival is a new version too).
fn content_version(
    handle: &ResourceHandle,
    providers: &BTreeMap<String, Value>,
    domain: &OperatorDomain,
) -> String {
    let api_version = domain.api_version();
    let content = HandleContent::of_handle(handle, &api_version);
    let specs: BTreeMap<&str, &Value> = provider_names(&handle.spec)
        .into_iter()
        .map(|name| (name, providers.get(name).unwrap_or(&Value::Null)))
        .collect();
    // Fields serialise in declaration order, and maps as the API server gives them back (keys
    // sorted), so equal contents serialise alike.
    let canonical = json!({"handle": content, "providers": specs}).to_string();
    let digest = Sha256::digest(canonical.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    hex[..VERSION_LENGTH].to_owned()
}

/// The pool's version: that of `new_handle`, the handle the pool makes now
/// (`core::handle::new::handle_for_pool`), given the spec (as JSON) of each provider by name.
pub(crate) fn pool_version(
    new_handle: &ResourceHandle,
    providers: &BTreeMap<String, Value>,
    domain: &OperatorDomain,
) -> String {
    content_version(new_handle, providers, domain)
}

/// The spec, as JSON, of each provider in `catalog` that `handle` uses, by name: what
/// [`pool_version`] and [`handle_version`] digest besides the handle's content.
pub(crate) fn provider_specs(
    catalog: &ProviderCatalog,
    handle: &ResourceHandle,
) -> BTreeMap<String, Value> {
    provider_names(&handle.spec)
        .into_iter()
        .filter_map(|name| {
            let spec = serde_json::to_value(catalog.get(name).ok()?.spec()).ok()?;
            Some((name.to_owned(), spec))
        })
        .collect()
}

/// Stamps `handle`, about to be made by a pool, with the pool's `version`.
pub(crate) fn stamp(handle: &mut ResourceHandle, version: &str, domain: &OperatorDomain) {
    handle
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(domain.resource_pool_version(), version.to_owned());
}

/// The version of `handle`: its annotation when the pool stamped one; otherwise (a handle
/// made before this broker, by Poolboy) the version its own content would have with today's
/// providers, so that it is stale exactly when the pool's spec moved away from it.
pub(crate) fn handle_version(
    handle: &ResourceHandle,
    providers: &BTreeMap<String, Value>,
    domain: &OperatorDomain,
) -> String {
    match handle
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&domain.resource_pool_version()))
    {
        Some(version) => version.clone(),
        None => content_version(handle, providers, domain),
    }
}

/// Sets the pool's [`HANDLES_UP_TO_DATE`] condition: False while `stale` of its `unbound`
/// handles are of an earlier version (the refresh in progress), True once none is.
pub(crate) fn set_refresh_condition(
    status: &mut ResourcePoolStatus,
    version: &str,
    stale: usize,
    unbound: usize,
    generation: Option<i64>,
    now: chrono::DateTime<chrono::Utc>,
) -> Change {
    let desired = match stale {
        0 => DesiredCondition {
            type_: HANDLES_UP_TO_DATE,
            status: ConditionStatus::True,
            reason: "UpToDate",
            message: format!("every unbound handle is of pool version {version}"),
            observed_generation: generation,
        },
        _ => DesiredCondition {
            type_: HANDLES_UP_TO_DATE,
            status: ConditionStatus::False,
            reason: "Refreshing",
            message: format!(
                "{stale} of {unbound} unbound handles are of an earlier version of the pool or \
                 its providers: replacing them with handles of version {version}, each deleted \
                 once a replacement is ready"
            ),
            observed_generation: generation,
        },
    };
    let mut conditions = status.conditions.take().unwrap_or_default();
    let change = set_condition(&mut conditions, desired, now);
    status.conditions = Some(conditions);
    change
}

#[cfg(test)]
mod tests;

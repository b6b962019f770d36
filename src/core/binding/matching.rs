//! Which provider serves a claim template (§6.2), whether a pooled handle fits a claim
//! (`matchIgnore`, §7.1), and the order in which bind candidates are tried (Δ§3.2).

use std::cmp::Ordering;
use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, TimeDelta, Utc};
use fancy_regex::Regex;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::api::handle::{HandleResource, ResourceHandleSpec};
use crate::api::{OperatorDomain, ResourceHandle};
use crate::core::json::merge::{MergeMode, deep_merge};
use crate::core::json::patch::{OpKind, compile_anchored, diff, values_equal};

#[cfg(test)]
mod tests;

/// Errors from provider resolution, `matchIgnore` compilation and candidate selection.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MatchError {
    /// A `matchIgnore[index]` entry that does not compile.
    #[error("matchIgnore[{index}] {pattern:?} is not a valid regular expression: {message}")]
    InvalidIgnoreRegex {
        index: usize,
        pattern: String,
        message: String,
    },
    /// Candidate selection needed a provider's compiled `matchIgnore` that the caller did not
    /// supply (the provider is missing or its `matchIgnore` does not compile).
    #[error("no compiled matchIgnore for ResourceProvider {provider:?}")]
    MissingMatchIgnore { provider: String },
}

/// Whether a provider's `match` selects `template` (§6.2): deep-merging `match` into a copy of
/// the template (with overwrite) leaves it unchanged, i.e. every field of `match` is in the
/// template with an equal value, lists compared element-wise. An empty `match` selects nothing.
pub(crate) fn provider_matches(match_spec: &Value, template: &Value) -> bool {
    let empty = match match_spec {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        _ => false,
    };
    if empty {
        return false;
    }
    let mut merged = template.clone();
    deep_merge(&mut merged, match_spec, MergeMode::Overwrite);
    values_equal(&merged, template)
}

/// A provider's compiled `matchIgnore`: JSON-pointer regexes, each anchored at both ends.
#[derive(Clone, Debug, Default)]
pub(crate) struct MatchIgnore {
    regexes: Vec<Regex>,
}

impl MatchIgnore {
    /// Compiles the patterns as `^(?:pattern)$` (Poolboy's `pattern + '$'` leaves the first
    /// branch of a top-level alternation unanchored; fixed).
    pub(crate) fn compile(patterns: &[String]) -> Result<Self, MatchError> {
        let regexes = patterns
            .iter()
            .enumerate()
            .map(|(index, pattern)| {
                compile_anchored(pattern).map_err(|message| MatchError::InvalidIgnoreRegex {
                    index,
                    pattern: pattern.clone(),
                    message,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { regexes })
    }

    /// Whether some pattern matches the whole path. A pattern that exceeds the backtrack limit
    /// does not match: a handle is not bound on a difference we could not vet.
    fn ignores(&self, path: &str) -> bool {
        self.regexes
            .iter()
            .any(|re| re.is_match(path).unwrap_or(false))
    }
}

/// [`template_fit`] without the why.
#[cfg(test)]
pub(crate) fn template_match(
    handle_template: &Value,
    claim_template: &Value,
    ignore: &MatchIgnore,
) -> Option<usize> {
    template_fit(handle_template, claim_template, ignore).ok()
}

/// Whether a handle's resource template fits a claim's (§7.1 step 3, `check_template_match`):
/// the diff handle → claim, keeping only `add` and `replace` (keys only on the handle do not
/// matter), must touch only paths `ignore` matches. Returns the number of ignored differences,
/// or the first path that differs and is not ignored.
fn template_fit(
    handle_template: &Value,
    claim_template: &Value,
    ignore: &MatchIgnore,
) -> Result<usize, String> {
    let mut ignored = 0;
    for op in diff(handle_template, claim_template) {
        if op.kind() == OpKind::Remove {
            continue;
        }
        if !ignore.ignores(op.path()) {
            return Err(op.path().to_owned());
        }
        ignored += 1;
    }
    Ok(ignored)
}

/// Why a handle is not a bind candidate for a claim: the answer to "why didn't my claim match?".
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Rejection {
    Bound,
    BeingDeleted,
    Unhealthy,
    /// The claim asks for another pool.
    OtherPool,
    /// Its lifespan ends too soon to bind (B04).
    EndsTooSoon,
    MoreResources {
        handle: usize,
        claim: usize,
    },
    ProviderDiffers {
        index: usize,
        handle: String,
        claim: String,
    },
    /// The first template path that differs and the provider's `matchIgnore` does not cover.
    TemplateDiffers {
        index: usize,
        path: String,
    },
}

impl Rejection {
    /// Whether the handle is someone else's or going: not worth explaining to a claim.
    pub(crate) fn is_taken(&self) -> bool {
        matches!(self, Rejection::Bound | Rejection::BeingDeleted)
    }
}

/// How many rejected handles [`explain_no_fit`] names; the rest are counted.
const EXPLAINED_HANDLES: usize = 5;

/// Why no handle fits a claim, in a line users read (an Event, `poolboy render`): each free
/// handle with its reason, at most `EXPLAINED_HANDLES` of them; bound and deleted ones are
/// left out.
pub(crate) fn explain_no_fit(rejections: &[(&ResourceHandle, Rejection)]) -> String {
    let free: Vec<String> = rejections
        .iter()
        .filter(|(_, rejection)| !rejection.is_taken())
        .map(|(handle, rejection)| {
            let name = handle.metadata.name.as_deref().unwrap_or_default();
            match &handle.spec.resource_pool {
                Some(pool) => format!("{name} (pool {}): {rejection}", pool.name),
                None => format!("{name}: {rejection}"),
            }
        })
        .collect();
    if free.is_empty() {
        return "no unbound ResourceHandle exists".to_owned();
    }
    let mut text = free
        .iter()
        .take(EXPLAINED_HANDLES)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if free.len() > EXPLAINED_HANDLES {
        text.push_str(&format!("; and {} more", free.len() - EXPLAINED_HANDLES));
    }
    format!("no unbound ResourceHandle fits: {text}")
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::Bound => write!(f, "bound to another claim"),
            Rejection::BeingDeleted => write!(f, "being deleted"),
            Rejection::Unhealthy => write!(f, "unhealthy"),
            Rejection::OtherPool => write!(f, "of another pool than the claim asks for"),
            Rejection::EndsTooSoon => write!(
                f,
                "its lifespan ends in less than {BIND_LIFESPAN_MARGIN_SECONDS} s"
            ),
            Rejection::MoreResources { handle, claim } => {
                write!(f, "{handle} resources, the claim has {claim}")
            }
            Rejection::ProviderDiffers {
                index,
                handle,
                claim,
            } => write!(
                f,
                "resource {index} is of provider {handle}, the claim's of {claim}"
            ),
            Rejection::TemplateDiffers { index, path } => {
                write!(f, "resource {index}'s template differs at {path}")
            }
        }
    }
}

/// A handle's health as binding and pools see it (Δ§3.2 `is_healthy`), derived from
/// `status.resources`, not `status.healthy`: `Some(false)` if any resource is unhealthy; else
/// `None` if any resource is waiting (`waitingFor`) without a health value; else `Some(true)`,
/// including resources without a health check and handles without status.
pub(crate) fn handle_is_healthy(handle: &ResourceHandle) -> Option<bool> {
    let resources = handle
        .status
        .as_ref()
        .and_then(|s| s.resources.as_deref())
        .unwrap_or_default();
    let mut healthy = Some(true);
    for resource in resources {
        if resource.healthy == Some(false) {
            return Some(false);
        }
        if resource.waiting_for.is_some() && resource.healthy.is_none() {
            healthy = None;
        }
    }
    healthy
}

/// One resource a claim wants, as binding compares it with a handle's resources.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DesiredResource<'a> {
    /// The provider assigned to this resource (the claim's `status.resources[i].provider.name`).
    pub provider_name: &'a str,
    /// The claim's resource name, if any.
    pub name: Option<&'a str>,
    /// The claim's resource template; absent counts as `{}`.
    pub template: Option<&'a Value>,
}

/// An unbound handle that fits the claim, with the differences that rank it.
#[derive(Clone, Debug)]
pub(crate) struct BindCandidate<'h> {
    pub handle: &'h ResourceHandle,
    /// Claim resources the handle lacks (they are appended on bind).
    pub extra_claim_resources: usize,
    /// Resources whose name differs between claim and handle.
    pub name_mismatches: usize,
    /// Template differences allowed by the providers' `matchIgnore`.
    pub template_differences: usize,
    /// [`handle_is_healthy`]: never `Some(false)` for a candidate.
    pub healthy: Option<bool>,
}

/// Whether a handle is free to bind (Δ§3.2): bound to no claim and not being deleted. On the
/// parts of a handle, so that a controller can sift its store before converting handles.
pub(crate) fn is_free(metadata: &ObjectMeta, spec: &ResourceHandleSpec) -> bool {
    spec.resource_claim.is_none() && metadata.deletion_timestamp.is_none()
}

/// Whether a claim let go of the handle ([`OperatorDomain::released_from_claim`]): a claim that
/// lost a bind race to another process, or found a handle bound to it that it never recorded,
/// unbinds it with this mark. Bound for an unknown time, it may have rendered its
/// resources for that claim, so it is never bound again, its pool does not count it, and the
/// handle controller deletes it.
pub(crate) fn is_released(metadata: &ObjectMeta, domain: &OperatorDomain) -> bool {
    metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(&domain.released_from_claim()))
}

/// Whether a handle is worth ranking for a claim ([`bind_candidates`]): free ([`is_free`]), not
/// [`is_released`], and in the operator namespace, where handles live (Poolboy lists handles
/// there only).
pub(crate) fn is_bind_candidate(
    metadata: &ObjectMeta,
    spec: &ResourceHandleSpec,
    domain: &OperatorDomain,
    operator_namespace: &str,
) -> bool {
    is_free(metadata, spec)
        && !is_released(metadata, domain)
        && metadata.namespace.as_deref() == Some(operator_namespace)
}

/// Handles whose lifespan ends sooner than this are not bound (Δ§3.2, B04).
pub(crate) const BIND_LIFESPAN_MARGIN_SECONDS: i64 = 120;

/// The handles a claim may bind, best first (Δ§3.2 "Binding").
///
/// Never candidates: handles being deleted or already bound. Skipped: unhealthy handles
/// ([`handle_is_healthy`] false); handles from another pool when the claim names one
/// (`pool_name`, the claim's `D/resource-pool-name` annotation); handles whose
/// `spec.lifespan.end` is less than 120 s after `now` or is not a valid timestamp; handles with
/// more resources than the claim; handles whose provider differs at some index; handles whose
/// templates fail [`template_match`] with that provider's `matchIgnore` (from `match_ignores`,
/// by provider name; an error if it is missing).
///
/// Order, first difference wins: fewer extra claim resources; fewer name mismatches; fewer
/// template differences; healthy before unknown health; ready before not ready; higher
/// `spec.preferenceScore` (absent = 0); older `creationTimestamp`; then name. v1.12's "unknown
/// readiness before known-unready" rule is gone (B05).
pub(crate) fn bind_candidates<'h>(
    claim_resources: &[DesiredResource<'_>],
    pool_name: Option<&str>,
    handles: impl IntoIterator<Item = &'h ResourceHandle>,
    match_ignores: &HashMap<String, MatchIgnore>,
    now: DateTime<Utc>,
) -> Result<Vec<BindCandidate<'h>>, MatchError> {
    let mut candidates: Vec<BindCandidate<'h>> =
        assess_all(claim_resources, pool_name, handles, match_ignores, now)?
            .into_iter()
            .filter_map(|(_, assessed)| assessed.ok())
            .collect();
    candidates.sort_by(preference);
    Ok(candidates)
}

/// The handles among `handles` that are not bind candidates, each with why not
/// ([`bind_candidates`]' rules, in its order: the first that fails).
pub(crate) fn rejections<'h>(
    claim_resources: &[DesiredResource<'_>],
    pool_name: Option<&str>,
    handles: impl IntoIterator<Item = &'h ResourceHandle>,
    match_ignores: &HashMap<String, MatchIgnore>,
    now: DateTime<Utc>,
) -> Result<Vec<(&'h ResourceHandle, Rejection)>, MatchError> {
    Ok(
        assess_all(claim_resources, pool_name, handles, match_ignores, now)?
            .into_iter()
            .filter_map(|(handle, assessed)| assessed.err().map(|rejection| (handle, rejection)))
            .collect(),
    )
}

/// A handle, and what [`assess`] said of it.
type Assessed<'h> = (&'h ResourceHandle, Result<BindCandidate<'h>, Rejection>);

/// Each of `handles` [`assess`]ed, in order, sharing one [`Fits`].
fn assess_all<'h>(
    claim_resources: &[DesiredResource<'_>],
    pool_name: Option<&str>,
    handles: impl IntoIterator<Item = &'h ResourceHandle>,
    match_ignores: &HashMap<String, MatchIgnore>,
    now: DateTime<Utc>,
) -> Result<Vec<Assessed<'h>>, MatchError> {
    let mut fits = Fits::default();
    handles
        .into_iter()
        .map(|handle| {
            let assessed = assess(
                claim_resources,
                pool_name,
                handle,
                match_ignores,
                &mut fits,
                now,
            )?;
            Ok((handle, assessed))
        })
        .collect()
}

/// One handle against the claim: a candidate with what ranks it, or why not.
fn assess<'h>(
    claim_resources: &[DesiredResource<'_>],
    pool_name: Option<&str>,
    handle: &'h ResourceHandle,
    match_ignores: &HashMap<String, MatchIgnore>,
    fits: &mut Fits<'h>,
    now: DateTime<Utc>,
) -> Result<Result<BindCandidate<'h>, Rejection>, MatchError> {
    if handle.spec.resource_claim.is_some() {
        return Ok(Err(Rejection::Bound));
    }
    if handle.metadata.deletion_timestamp.is_some() {
        return Ok(Err(Rejection::BeingDeleted));
    }
    let healthy = handle_is_healthy(handle);
    if healthy == Some(false) {
        return Ok(Err(Rejection::Unhealthy));
    }
    if let Some(pool) = pool_name
        && handle.spec.resource_pool.as_ref().map(|p| p.name.as_str()) != Some(pool)
    {
        return Ok(Err(Rejection::OtherPool));
    }
    if ends_too_soon(handle, now) {
        return Ok(Err(Rejection::EndsTooSoon));
    }
    let handle_resources = handle.spec.resources.as_deref().unwrap_or_default();
    Ok(fits
        .fit(claim_resources, handle_resources, match_ignores)?
        .map(|fit| BindCandidate {
            handle,
            extra_claim_resources: fit.extra_claim_resources,
            name_mismatches: fit.name_mismatches,
            template_differences: fit.template_differences,
            healthy,
        }))
}

/// How a handle's resources fit the claim's, for ranking ([`BindCandidate`]).
#[derive(Clone, Copy, Debug)]
struct Fit {
    extra_claim_resources: usize,
    name_mismatches: usize,
    template_differences: usize,
}

/// The fits of the last few distinct resource lists one ranking met: the handles of a pool
/// share theirs, so ranking a pool of 1,000 diffs one list against the claim, not 1,000.
/// Handles that all differ cost a comparison with each kept list besides their own diff.
#[derive(Default)]
struct Fits<'h> {
    kept: VecDeque<(&'h [HandleResource], Result<Fit, Rejection>)>,
}

/// How many distinct resource lists [`Fits`] keeps.
const FITS_KEPT: usize = 8;

impl<'h> Fits<'h> {
    fn fit(
        &mut self,
        claim_resources: &[DesiredResource<'_>],
        handle_resources: &'h [HandleResource],
        match_ignores: &HashMap<String, MatchIgnore>,
    ) -> Result<Result<Fit, Rejection>, MatchError> {
        if let Some((_, fit)) = self.kept.iter().find(|(kept, _)| *kept == handle_resources) {
            return Ok(fit.clone());
        }
        let fit = resources_fit(claim_resources, handle_resources, match_ignores)?;
        if self.kept.len() == FITS_KEPT {
            self.kept.pop_front();
        }
        self.kept.push_back((handle_resources, fit.clone()));
        Ok(fit)
    }
}

/// [`Fit`] of a handle's resources, or why they do not fit: more resources than the claim, a
/// provider that differs at some index, a template that differs where `matchIgnore` does not
/// allow it.
fn resources_fit(
    claim_resources: &[DesiredResource<'_>],
    handle_resources: &[HandleResource],
    match_ignores: &HashMap<String, MatchIgnore>,
) -> Result<Result<Fit, Rejection>, MatchError> {
    let Some(extra_claim_resources) = claim_resources.len().checked_sub(handle_resources.len())
    else {
        return Ok(Err(Rejection::MoreResources {
            handle: handle_resources.len(),
            claim: claim_resources.len(),
        }));
    };
    let empty = Value::Object(Default::default());
    let mut name_mismatches = 0;
    let mut template_differences = 0;
    for (index, (handle_resource, claim_resource)) in
        handle_resources.iter().zip(claim_resources).enumerate()
    {
        if handle_resource.provider.name != claim_resource.provider_name {
            return Ok(Err(Rejection::ProviderDiffers {
                index,
                handle: handle_resource.provider.name.clone(),
                claim: claim_resource.provider_name.to_owned(),
            }));
        }
        if handle_resource.name.as_deref() != claim_resource.name {
            name_mismatches += 1;
        }
        let ignore = match_ignores
            .get(claim_resource.provider_name)
            .ok_or_else(|| MatchError::MissingMatchIgnore {
                provider: claim_resource.provider_name.to_owned(),
            })?;
        match template_fit(
            handle_resource.template.as_ref().unwrap_or(&empty),
            claim_resource.template.unwrap_or(&empty),
            ignore,
        ) {
            Ok(differences) => template_differences += differences,
            Err(path) => return Ok(Err(Rejection::TemplateDiffers { index, path })),
        }
    }
    Ok(Ok(Fit {
        extra_claim_resources,
        name_mismatches,
        template_differences,
    }))
}

/// Δ§3.2, B04: `spec.lifespan.end` under 120 s away (or already past). An end that is not a
/// timestamp also disqualifies: Poolboy's bind would fail on it.
fn ends_too_soon(handle: &ResourceHandle, now: DateTime<Utc>) -> bool {
    let Some(end) = handle.spec.lifespan.as_ref().and_then(|l| l.end.as_deref()) else {
        return false;
    };
    match DateTime::parse_from_rfc3339(end) {
        Ok(end) => end.with_timezone(&Utc) - now < TimeDelta::seconds(BIND_LIFESPAN_MARGIN_SECONDS),
        Err(_) => true,
    }
}

/// The strict preference order of Δ§3.2: `Less` means `a` is tried first.
fn preference(a: &BindCandidate<'_>, b: &BindCandidate<'_>) -> Ordering {
    let healthy_rank = |c: &BindCandidate<'_>| u8::from(c.healthy != Some(true));
    let ready_rank = |c: &BindCandidate<'_>| {
        u8::from(c.handle.status.as_ref().and_then(|s| s.ready) != Some(true))
    };
    let score = |c: &BindCandidate<'_>| c.handle.spec.preference_score.unwrap_or(0.0);
    // Absent creationTimestamp (never on a stored object) sorts as the newest.
    let created = |c: &BindCandidate<'_>| {
        let ts = c.handle.metadata.creation_timestamp.as_ref();
        (ts.is_none(), ts.cloned())
    };
    a.extra_claim_resources
        .cmp(&b.extra_claim_resources)
        .then(a.name_mismatches.cmp(&b.name_mismatches))
        .then(a.template_differences.cmp(&b.template_differences))
        .then(healthy_rank(a).cmp(&healthy_rank(b)))
        .then(ready_rank(a).cmp(&ready_rank(b)))
        .then(score(b).partial_cmp(&score(a)).unwrap_or(Ordering::Equal))
        .then_with(|| created(a).cmp(&created(b)))
        .then_with(|| a.handle.metadata.name.cmp(&b.handle.metadata.name))
}

//! Admission checks: whether a claim being created or changed would be
//! refused by the claim controller's validation, decided by the very functions the controller
//! resolves a claim with ([`resolve_claim`]), so that the message a user gets from
//! `kubectl apply` is the one the claim's status would say.
//!
//! Only what the claim itself gets wrong is refused; what depends on the providers the broker
//! knows lets the claim in with a warning (docs/design.md, "core::claim::admission").

use chrono::{DateTime, Utc};

use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle};
use crate::core::claim::providers::AssignmentError;
use crate::core::claim::resolve::{ResolveError, ResolveInput, resolve_claim};
use crate::core::lifespan::{StartGate, start_gate};
use crate::core::provider::ProviderCatalog;
use crate::core::template::TemplateEngine;

/// A create or update of a claim to check.
pub(crate) struct AdmissionInput<'a> {
    /// The claim as it would be stored.
    pub claim: &'a ResourceClaim,
    /// The claim as it is stored, for an update.
    pub old: Option<&'a ResourceClaim>,
    /// The claim's bound handle, if any: validation checks see it as `resource_handle`.
    pub handle: Option<&'a ResourceHandle>,
    pub catalog: &'a ProviderCatalog,
    pub templates: &'a TemplateEngine,
    pub domain: &'a OperatorDomain,
    pub now: DateTime<Utc>,
}

/// What the admission check says about a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Let it in; the warnings (if any) say what the claim will wait for.
    Allowed { warnings: Vec<String> },
    /// Refuse it with this message: the claim's status would say it (reason `Invalid`).
    Denied(String),
}

impl Verdict {
    fn allowed() -> Self {
        Verdict::Allowed {
            warnings: Vec::new(),
        }
    }

    fn warning(message: String) -> Self {
        Verdict::Allowed {
            warnings: vec![message],
        }
    }
}

/// Checks a claim as the claim controller would validate it (§6.1, §7 steps 2–6, §8).
pub(crate) fn admit_claim(input: &AdmissionInput<'_>) -> Verdict {
    let claim = input.claim;
    // An update that leaves the spec alone changes nothing validation decides on its own: a
    // claim stored before the check existed (or while the broker was down) must still be
    // relabelled, lose its finalizer, and so on.
    if input.old.is_some_and(|old| old.spec == claim.spec) {
        return Verdict::allowed();
    }
    // What the controller does not validate: a claim being deleted (§7.3), ignored (§7.6), or
    // detached (§7 step 2).
    if claim.metadata.deletion_timestamp.is_some()
        || input.domain.ignores(&claim.metadata)
        || claim
            .status
            .as_ref()
            .and_then(|s| s.resource_handle.as_ref())
            .is_some_and(|h| h.detached == Some(true))
    {
        return Verdict::allowed();
    }
    // Δ§3.1.1: a claim is validated when it starts; one starting later is checked as it will
    // be then.
    let now = match start_gate(claim, input.now) {
        Ok(StartGate::Open) => input.now,
        Ok(StartGate::OpensAt(start)) => start,
        Err(e) => return Verdict::Denied(e.to_string()),
    };
    let resolved = resolve_claim(&ResolveInput {
        claim,
        handle: input.handle,
        catalog: input.catalog,
        templates: input.templates,
        domain: input.domain,
        now,
    });
    match resolved {
        // The controller's message for an invalid claim (`Valid` False, `InvalidClaim`).
        Ok(resolved) if !resolved.is_valid() => Verdict::Denied(resolved.problem_message()),
        Ok(_) => Verdict::allowed(),
        Err(ResolveError::Claim(
            e @ (AssignmentError::BothProviderAndResources
            | AssignmentError::NeitherProviderNorResources
            | AssignmentError::ProviderImmutable { .. }
            | AssignmentError::NoProviderOrTemplate(_)),
        )) => Verdict::Denied(e.to_string()),
        // A provider missing, broken or ambiguous, a provider's template that fails: the
        // provider's to fix, and the claim waits for it.
        Err(e) => Verdict::warning(e.to_string()),
    }
}

#[cfg(test)]
mod tests;

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
mod tests {
    use super::*;
    use crate::core::test_fixtures::{Env, claim, handle, now};

    /// Parameters with a schema and a check, one that may not change, one computed from the
    /// bound handle's vars.
    const LAB: &str = r#"
metadata: {name: lab}
spec:
  override: {apiVersion: v1, kind: ConfigMap}
  parameters:
  - name: region
    required: true
    validation:
      openAPIV3Schema: {type: string, enum: [us-east, eu-west]}
  - name: seats
    allowUpdate: true
    default: {value: 2}
    validation:
      openAPIV3Schema: {type: integer, minimum: 1}
      checks:
      - name: within the handle's limit
        check: "resource_handle is none or value <= limit"
"#;

    const CONFIGMAP: &str = r#"
metadata: {name: configmap}
spec:
  match: {apiVersion: v1, kind: ConfigMap}
  validation:
    openAPIV3Schema:
      type: object
      properties:
        data:
          type: object
          additionalProperties: {type: string}
    checks:
    - name: not red
      check: "(data | default({})).color | default('') != 'red'"
"#;

    const BROKEN: &str = r#"
metadata: {name: broken}
spec:
  match: {apiVersion: v1, kind: Service}
  matchIgnore: ["("]
"#;

    struct Check {
        env: Env,
        catalog: ProviderCatalog,
    }

    impl Check {
        fn new() -> Self {
            let env = Env::new();
            let catalog = env.catalog(&[LAB, CONFIGMAP, BROKEN]);
            Self { env, catalog }
        }

        fn verdict(
            &self,
            claim: &ResourceClaim,
            old: Option<&ResourceClaim>,
            handle: Option<&ResourceHandle>,
        ) -> Verdict {
            admit_claim(&AdmissionInput {
                claim,
                old,
                handle,
                catalog: &self.catalog,
                templates: &self.env.templates,
                domain: &self.env.domain,
                now: now(),
            })
        }

        fn new_claim(&self, yaml: &str) -> Verdict {
            self.verdict(&claim(yaml), None, None)
        }
    }

    fn denied(message: &str) -> Verdict {
        Verdict::Denied(message.to_owned())
    }

    #[test]
    fn a_valid_claim_is_allowed_without_warnings() {
        let check = Check::new();
        let provider_claim = "metadata: {name: c}\nspec: \
             {provider: {name: lab, parameterValues: {region: us-east}}}";
        assert_eq!(check.new_claim(provider_claim), Verdict::allowed());
        let resources_claim = "metadata: {name: c}\nspec: \
             {resources: [{template: {apiVersion: v1, kind: ConfigMap, data: {color: blue}}}]}";
        assert_eq!(check.new_claim(resources_claim), Verdict::allowed());
    }

    #[test]
    fn parameter_errors_are_refused_with_the_status_message() {
        let check = Check::new();
        let verdict = check.new_claim(
            "metadata: {name: c}\nspec: \
             {provider: {name: lab, parameterValues: {region: mars, seats: 0, color: red}}}",
        );
        let Verdict::Denied(message) = verdict else {
            panic!("allowed: {verdict:?}");
        };
        assert!(
            message.starts_with(
                "spec.provider.parameterValues: Parameter region schema validation failed: "
            ),
            "{message}"
        );
        assert!(
            message.contains(
                "; spec.provider.parameterValues: Parameter seats schema validation failed: "
            ),
            "{message}"
        );
        assert!(
            message.ends_with("; spec.provider.parameterValues: No such parameter color."),
            "{message}"
        );
        let missing = check.new_claim("metadata: {name: c}\nspec: {provider: {name: lab}}");
        assert_eq!(
            missing,
            denied("spec.provider.parameterValues: Parameter region is required.")
        );
    }

    #[test]
    fn template_errors_are_refused_after_the_defaults() {
        let check = Check::new();
        let red = check.new_claim(
            "metadata: {name: c}\nspec: \
             {resources: [{template: {apiVersion: v1, kind: ConfigMap, data: {color: red}}}]}",
        );
        assert_eq!(
            red,
            denied("spec.resources[0]: Validation check failed: not red")
        );
        let Verdict::Denied(schema) = check.new_claim(
            "metadata: {name: c}\nspec: \
             {resources: [{template: {apiVersion: v1, kind: ConfigMap, data: {size: 1}}}]}",
        ) else {
            panic!("a number in data is allowed");
        };
        assert!(
            schema.starts_with("spec.resources[0]: 1 is not of type 'string'"),
            "{schema}"
        );
    }

    #[test]
    fn the_claims_own_shape_is_refused() {
        let check = Check::new();
        assert_eq!(
            check.new_claim("metadata: {name: c}\nspec: {provider: {name: lab}, resources: [{}]}"),
            denied("ResourceClaim has both spec.provider and spec.resources")
        );
        assert_eq!(
            check.new_claim("metadata: {name: c}\nspec: {}"),
            denied("ResourceClaim has neither spec.provider nor spec.resources")
        );
        assert_eq!(
            check.new_claim("metadata: {name: c}\nspec: {resources: [{name: x}]}"),
            denied(
                "ResourceClaim spec.resources[0] requires either an explicit provider or a \
                 resource template to match"
            )
        );
        let start = check.new_claim(
            "metadata: {name: c}\nspec: {provider: {name: lab}, lifespan: {start: soon}}",
        );
        assert!(matches!(start, Verdict::Denied(_)), "{start:?}");
    }

    #[test]
    fn what_waits_for_a_provider_is_allowed_with_a_warning() {
        let check = Check::new();
        let cases = [
            (
                "{provider: {name: nope}}",
                "ResourceProvider nope not found",
            ),
            (
                "{resources: [{template: {apiVersion: v1, kind: Pod}}]}",
                "spec.resources[0]: Unable to match template to ResourceProvider",
            ),
        ];
        for (spec, warning) in cases {
            let verdict = check.new_claim(&format!("metadata: {{name: c}}\nspec: {spec}"));
            assert_eq!(
                verdict,
                Verdict::Allowed {
                    warnings: vec![warning.to_owned()]
                },
                "{spec}"
            );
        }
        let broken = check.new_claim("metadata: {name: c}\nspec: {provider: {name: broken}}");
        let Verdict::Allowed { warnings } = broken else {
            panic!("a broken provider refuses its claims: {broken:?}");
        };
        assert!(
            warnings[0].starts_with("ResourceProvider broken is invalid: "),
            "{warnings:?}"
        );
    }

    #[test]
    fn an_update_that_leaves_the_spec_alone_is_allowed_even_when_invalid() {
        let check = Check::new();
        let invalid = claim(
            "metadata: {name: c, finalizers: [poolboy.gpte.redhat.com]}\n\
             spec: {provider: {name: lab, parameterValues: {region: mars}}}",
        );
        let mut relabelled = invalid.clone();
        relabelled.metadata.finalizers = None;
        relabelled.metadata.labels = Some([("team".to_owned(), "blue".to_owned())].into());
        assert_eq!(
            check.verdict(&relabelled, Some(&invalid), None),
            Verdict::allowed()
        );
        // A change of spec is checked, whatever the claim was before.
        let mut changed = relabelled.clone();
        if let Some(provider) = changed.spec.provider.as_mut() {
            provider.parameter_values = Some(
                [("region".to_owned(), serde_json::json!("venus"))]
                    .into_iter()
                    .collect(),
            );
        }
        assert!(matches!(
            check.verdict(&changed, Some(&invalid), None),
            Verdict::Denied(_)
        ));
    }

    #[test]
    fn an_update_is_checked_against_the_recorded_values_and_the_bound_handle() {
        let check = Check::new();
        let recorded =
            "status: {provider: {name: lab, parameterValues: {region: us-east, seats: 2}}}";
        let old = claim(&format!(
            "metadata: {{name: c}}\n\
             spec: {{provider: {{name: lab, parameterValues: {{region: us-east}}}}}}\n{recorded}"
        ));
        // §8 step 2: region may not change once validated.
        let moved = claim(&format!(
            "metadata: {{name: c}}\n\
             spec: {{provider: {{name: lab, parameterValues: {{region: eu-west}}}}}}\n{recorded}"
        ));
        assert_eq!(
            check.verdict(&moved, Some(&old), None),
            denied("spec.provider.parameterValues: Parameter region is immutable.")
        );
        // §6.1: nor may the provider.
        let other = claim(&format!(
            "metadata: {{name: c}}\nspec: {{provider: {{name: configmap}}}}\n{recorded}"
        ));
        assert_eq!(
            check.verdict(&other, Some(&old), None),
            denied(
                "spec.provider value (configmap) does not match status.provider value (lab): \
                 spec.provider is immutable"
            )
        );
        // The check sees the bound handle's vars, as the controller's does.
        let more = claim(&format!(
            "metadata: {{name: c}}\n\
             spec: {{provider: {{name: lab, parameterValues: {{region: us-east, seats: 6}}}}}}\n\
             {recorded}"
        ));
        let bound = handle("metadata: {name: guid-abcde}\nspec: {vars: {limit: 4}}");
        assert_eq!(check.verdict(&more, Some(&old), None), Verdict::allowed());
        assert_eq!(
            check.verdict(&more, Some(&old), Some(&bound)),
            denied(
                "spec.provider.parameterValues: Parameter seats failed check: within the \
                 handle's limit"
            )
        );
    }

    #[test]
    fn claims_the_controller_leaves_alone_are_allowed() {
        let check = Check::new();
        let invalid = "spec: {provider: {name: lab, parameterValues: {region: mars}}}";
        for metadata in [
            "metadata: {name: c, labels: {poolboy.gpte.redhat.com/ignore: ''}}",
            "metadata: {name: c, deletionTimestamp: '2026-11-21T11:00:00Z', finalizers: [x]}",
        ] {
            assert_eq!(
                check.new_claim(&format!("{metadata}\n{invalid}")),
                Verdict::allowed(),
                "{metadata}"
            );
        }
        let detached = format!(
            "metadata: {{name: c}}\n{invalid}\nstatus: {{resourceHandle: \
             {{apiVersion: poolboy.gpte.redhat.com/v1, kind: ResourceHandle, name: h, \
             namespace: poolboy, detached: true}}}}"
        );
        assert_eq!(check.new_claim(&detached), Verdict::allowed());
    }

    #[test]
    fn a_claim_that_starts_later_is_checked_as_it_will_be_then() {
        let env = Env::new();
        let provider = r#"
metadata: {name: timed}
spec:
  parameters:
  - name: day
    validation:
      checks:
      - name: not before the start
        check: "value >= now(False, '%Y-%m-%d')"
"#;
        let catalog = env.catalog(&[provider]);
        let verdict = |day: &str| {
            let claim = claim(&format!(
                "metadata: {{name: c}}\nspec: {{provider: {{name: timed, parameterValues: \
                 {{day: '{day}'}}}}, lifespan: {{start: '2026-12-01T00:00:00Z'}}}}"
            ));
            admit_claim(&AdmissionInput {
                claim: &claim,
                old: None,
                handle: None,
                catalog: &catalog,
                templates: &env.templates,
                domain: &env.domain,
                now: now(),
            })
        };
        assert_eq!(verdict("2026-12-01"), Verdict::allowed());
        assert_eq!(
            verdict("2026-11-25"),
            denied(
                "spec.provider.parameterValues: Parameter day failed check: not before the start"
            )
        );
    }
}

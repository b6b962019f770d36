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
    let start = check
        .new_claim("metadata: {name: c}\nspec: {provider: {name: lab}, lifespan: {start: soon}}");
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
    let recorded = "status: {provider: {name: lab, parameterValues: {region: us-east, seats: 2}}}";
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
        denied("spec.provider.parameterValues: Parameter day failed check: not before the start")
    );
}

use serde_json::json;

use super::*;
use crate::core::test_fixtures::{at, now};

fn options() -> RenderOptions {
    RenderOptions {
        domain: OperatorDomain::default(),
        operator_namespace: "poolboy".into(),
        handle_name: "guid-abcde".into(),
        now: now(),
    }
}

fn run(documents: &[&str]) -> Result<Rendered, RenderError> {
    let mut input = RenderInput::default();
    for (i, document) in documents.iter().enumerate() {
        let yaml = format!("apiVersion: poolboy.gpte.redhat.com/v1\n{document}");
        input
            .add_yaml(&format!("doc{i}"), &yaml)
            .expect("test input");
    }
    render(input, &options())
}

const CONFIGMAP: &str = r#"
kind: ResourceProvider
metadata: {name: configmap}
spec:
  match: {apiVersion: v1, kind: ConfigMap}
  matchIgnore: ["/data(/.*)?"]
  override: {metadata: {namespace: managed}}
  validation:
    checks: [{name: has data, check: "data is defined"}]
  lifespan: {default: 2h, unclaimed: 1h}
"#;

const POOL: &str = r#"
kind: ResourcePool
metadata: {name: configmaps}
spec:
  minAvailable: 1
  resources:
  - provider: {apiVersion: poolboy.gpte.redhat.com/v1, kind: ResourceProvider, name: configmap, namespace: poolboy}
    template: {apiVersion: v1, kind: ConfigMap, data: {a: b}}
  lifespan: {default: 3h, unclaimed: 1h}
"#;

const CLAIM: &str = r#"
kind: ResourceClaim
metadata: {name: c, namespace: user1}
spec:
  resources:
  - name: config
    template: {apiVersion: v1, kind: ConfigMap, data: {color: blue}}
"#;

fn definitions(rendered: &Rendered) -> Vec<&Value> {
    rendered
        .resources
        .iter()
        .filter_map(|r| match &r.outcome {
            RenderedOutcome::Definition(d) => Some(d),
            RenderedOutcome::Waiting(_) => None,
        })
        .collect()
}

#[test]
fn each_resource_shows_when_the_clock_alone_would_change_it() {
    // A stop time in the claim, compared with the current time in the override.
    let provider = CONFIGMAP.replace(
            "override: {metadata: {namespace: managed}}",
            "template: {enable: true}\n  override:\n    metadata: {namespace: managed}\n    data:\n      state: \"{{ 'stopped' if timestamp(resource_template.data.stop) < timestamp.utcnow else 'started' }}\"",
        );
    let schedule = |stop: &str| {
        CLAIM.replace(
            "data: {color: blue}",
            &format!("data: {{color: blue, stop: '{stop}'}}"),
        )
    };
    let rendered = run(&[&provider, &schedule("2026-11-21T12:30:00Z")]).unwrap();
    assert_eq!(definitions(&rendered)[0]["data"]["state"], "started");
    assert_eq!(
        rendered.resources[0].next_change,
        NextChange::At(at("2026-11-21T12:30:00Z"))
    );

    let rendered = run(&[&provider, &schedule("2026-11-21T11:00:00Z")]).unwrap();
    assert_eq!(definitions(&rendered)[0]["data"]["state"], "stopped");
    assert_eq!(rendered.resources[0].next_change, NextChange::Never);

    let rendered = run(&[CONFIGMAP, CLAIM]).unwrap();
    assert_eq!(rendered.resources[0].next_change, NextChange::Never);

    let printing = CONFIGMAP.replace(
            "override: {metadata: {namespace: managed}}",
            "template: {enable: true}\n  override: {metadata: {namespace: managed}, data: {seen: '{{ now() }}'}}",
        );
    let rendered = run(&[&printing, CLAIM]).unwrap();
    assert_eq!(rendered.resources[0].next_change, NextChange::Unpredictable);
}

#[test]
fn a_claim_gets_a_new_handle_and_its_resource() {
    let rendered = run(&[CONFIGMAP, CLAIM]).unwrap();
    assert_eq!(rendered.notes, ["a new handle is created for the claim"]);
    let handle = json!(rendered.handle);
    assert_eq!(handle["metadata"]["name"], "guid-abcde");
    assert_eq!(handle["spec"]["lifespan"]["end"], "2026-11-21T14:00:00Z");
    let definitions = definitions(&rendered);
    assert_eq!(definitions.len(), 1);
    assert_eq!(definitions[0]["metadata"]["name"], "guid0-abcde");
    assert_eq!(definitions[0]["metadata"]["namespace"], "managed");
    assert_eq!(definitions[0]["data"], json!({"color": "blue"}));
}

#[test]
fn a_claim_that_fits_the_pool_binds_to_its_handle() {
    let rendered = run(&[CONFIGMAP, POOL, CLAIM]).unwrap();
    assert_eq!(
        rendered.notes,
        ["the claim binds to an unbound handle of pool configmaps"]
    );
    let handle = json!(rendered.handle);
    let labels = &handle["metadata"]["labels"];
    assert_eq!(labels["poolboy.gpte.redhat.com/resource-claim-name"], "c");
    assert_eq!(
        labels["poolboy.gpte.redhat.com/resource-pool-name"],
        "configmaps"
    );
    // The pool's default replaces the unclaimed end.
    assert_eq!(handle["spec"]["lifespan"]["end"], "2026-11-21T15:00:00Z");
    assert_eq!(handle["spec"]["resources"][0]["name"], "config");
    // The claim's template reached the handle (§7 step 11).
    assert_eq!(
        handle["spec"]["resources"][0]["template"]["data"],
        json!({"a": "b", "color": "blue"})
    );
}

#[test]
fn a_claim_that_does_not_fit_the_pool_gets_a_new_handle() {
    let claim = CLAIM.replace(
        "kind: ConfigMap,",
        "kind: ConfigMap, metadata: {labels: {x: y}},",
    );
    let rendered = run(&[CONFIGMAP, POOL, &claim]).unwrap();
    assert_eq!(
        rendered.notes,
        [
            "no unbound ResourceHandle fits: guid-abcde (pool configmaps): resource 0's \
                 template differs at /metadata: a new handle is created",
            "a new handle is created for the claim",
        ]
    );
    assert!(rendered.handle.spec.resource_pool.is_none());
}

#[test]
fn a_pool_alone_renders_its_unclaimed_handle() {
    let rendered = run(&[CONFIGMAP, POOL]).unwrap();
    assert_eq!(rendered.notes, ["a pool handle, unclaimed"]);
    assert_eq!(
        rendered
            .handle
            .spec
            .lifespan
            .as_ref()
            .unwrap()
            .end
            .as_deref(),
        Some("2026-11-21T13:00:00Z")
    );
    assert_eq!(definitions(&rendered).len(), 1);
}

#[test]
fn a_resource_that_requires_a_claim_waits_in_an_unclaimed_pool_handle() {
    let provider = CONFIGMAP.replace("spec:\n", "spec:\n  resourceRequiresClaim: true\n");
    let rendered = run(&[&provider, POOL]).unwrap();
    assert!(matches!(
        &rendered.resources[..],
        [RenderedResource { index: 0, outcome: RenderedOutcome::Waiting(why), .. }]
            if why == "waiting for ResourceClaim"
    ));
}

#[test]
fn every_provider_problem_is_reported_before_anything_else() {
    let broken = r#"
kind: ResourceProvider
metadata: {name: broken}
spec: {matchIgnore: ["("], updateFilters: [{pathMatch: "["}]}
"#;
    let linked = r#"
kind: ResourceProvider
metadata: {name: linked}
spec: {linkedResourceProviders: [{name: nowhere}]}
"#;
    let error = run(&[CONFIGMAP, broken, linked, CLAIM]).unwrap_err();
    let RenderError::Providers(problems) = &error else {
        panic!("{error}");
    };
    let located: Vec<(&str, &str)> = problems
        .iter()
        .map(|(name, p)| (name.as_str(), p.path.as_str()))
        .collect();
    assert_eq!(
        located,
        [
            ("broken", "spec.updateFilters"),
            ("broken", "spec.matchIgnore"),
            ("linked", "spec.linkedResourceProviders[0].name"),
        ]
    );
    let message = error.to_string();
    assert!(
        message.starts_with(
            "invalid ResourceProviders:\n  - ResourceProvider broken: spec.updateFilters: "
        ),
        "{message}"
    );
}

#[test]
fn every_claim_problem_is_reported_together() {
    let claim = r#"
kind: ResourceClaim
metadata: {name: c}
spec:
  resources:
  - template: {apiVersion: v1, kind: ConfigMap}
  - template: {apiVersion: v1, kind: ConfigMap, data: {}}
  - template: {apiVersion: v1, kind: ConfigMap}
"#;
    let error = run(&[CONFIGMAP, claim]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the ResourceClaim is invalid:\n  \
             - spec.resources[0]: Validation check failed: has data\n  \
             - spec.resources[2]: Validation check failed: has data"
    );
}

#[test]
fn parameter_errors_are_reported_together() {
    let lab = r#"
kind: ResourceProvider
metadata: {name: lab}
spec:
  parameters:
  - {name: region, required: true}
  - name: size
    validation: {openAPIV3Schema: {type: integer}}
  override: {apiVersion: v1, kind: ConfigMap}
"#;
    let claim = r#"
kind: ResourceClaim
metadata: {name: c}
spec: {provider: {name: lab, parameterValues: {size: big, colour: red}}}
"#;
    let error = run(&[lab, claim]).unwrap_err().to_string();
    let lines: Vec<&str> = error.lines().collect();
    assert_eq!(lines[0], "the ResourceClaim is invalid:");
    assert_eq!(lines[1], "  - Parameter region is required.");
    assert!(
        lines[2].starts_with(
            "  - Parameter size schema validation failed: 'big' is not of type 'integer'"
        ),
        "{error}"
    );
    assert_eq!(*lines.last().unwrap(), "  - No such parameter colour.");
}

#[test]
fn disabled_creation_without_a_fitting_handle_is_an_error() {
    let claim = CLAIM.replace("spec:\n", "spec:\n  disableCreation: true\n");
    let error = run(&[CONFIGMAP, &claim]).unwrap_err();
    assert!(error.to_string().contains("disableCreation"), "{error}");
}

#[test]
fn a_pool_with_a_provider_generates_its_resources() {
    let lab = r#"
kind: ResourceProvider
metadata: {name: lab}
spec:
  parameters: [{name: size, default: {value: 2}}]
  template: {enable: true, definition: {data: {size: "{{ size }}"}}}
  override: {apiVersion: v1, kind: ConfigMap}
"#;
    let pool = r#"
kind: ResourcePool
metadata: {name: labs}
spec: {minAvailable: 1, provider: {name: lab, parameterValues: {size: 4}}}
"#;
    let rendered = run(&[lab, pool]).unwrap();
    let handle = json!(rendered.handle);
    assert_eq!(
        handle["spec"]["resources"][0]["template"],
        json!({"data": {"size": "4"}})
    );
    assert_eq!(definitions(&rendered)[0]["data"]["size"], "4");
}

#[test]
fn apply_takes_a_null_test_as_absent_and_refuses_a_bound_handle() {
    let handle: ResourceHandle = serde_json::from_value(json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceHandle",
        "metadata": {"name": "guid-a"},
        "spec": {},
    }))
    .unwrap();
    let guard: json_patch::Patch = serde_json::from_value(json!([
            {"op": "test", "path": "/spec/resourceClaim", "value": null},
            {"op": "add", "path": "/spec/resourceClaim", "value": {
                "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim", "name": "c", "namespace": "n",
            }},
        ]))
        .unwrap();
    let bound = apply(&handle, &guard).unwrap();
    assert_eq!(bound.spec.resource_claim.as_ref().unwrap().name, "c");
    let error = apply(&bound, &guard).unwrap_err();
    assert!(error.to_string().contains("is not null"), "{error}");
}

use serde_json::{Value, json};

use super::*;
use crate::api::ResourceProvider;
use crate::core::naming::{NAME_ALPHABET, claim_handle_name};
use crate::core::provider::ProviderCompiler;
use crate::core::provider::schema::SchemaCache;
use crate::core::test_fixtures::{now, provider_with_spec};

fn claim(value: Value) -> ResourceClaim {
    let mut claim = json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "user", "uid": "u-1",
                     "creationTimestamp": "2026-11-21T11:00:00Z"},
    });
    if let (Some(claim), Value::Object(extra)) = (claim.as_object_mut(), value) {
        claim.extend(extra);
    }
    serde_json::from_value(claim).expect("valid claim")
}

/// The ConfigMap provider of the examples, reduced: match, default, schema defaults, a check.
fn configmap() -> ResourceProvider {
    provider_with_spec(
        "configmap",
        json!({
            "match": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchIgnore": ["/data(/.*)?"],
            "default": {"data": {"owner": "unknown"}},
            "override": {"metadata": {"namespace": "managed"}},
            "validation": {
                "openAPIV3Schema": {
                    "type": "object",
                    "required": ["apiVersion", "kind"],
                    "properties": {
                        "data": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                            "properties": {"size": {"type": "string", "default": "small"}},
                        },
                    },
                },
                "checks": [{"name": "data is small", "check": "data | length < 4"}],
            },
        }),
    )
}

/// A provider claim's provider: one parameter with a default, one required with a check.
fn lab() -> ResourceProvider {
    provider_with_spec(
        "lab",
        json!({
            "override": {"apiVersion": "v1", "kind": "ConfigMap"},
            "template": {"definition": {"data": {"region": "{{ region }}"}}},
            "parameters": [
                {"name": "region", "default": {"value": "east"}},
                {"name": "seats", "required": true,
                 "validation": {"openAPIV3Schema": {"type": "integer"},
                                "checks": [{"name": "few seats", "check": "value < 10"}]}},
            ],
        }),
    )
}

struct Fixture {
    catalog: ProviderCatalog,
    templates: TemplateEngine,
    domain: OperatorDomain,
}

impl Fixture {
    fn new(providers: Vec<ResourceProvider>) -> Self {
        let templates = TemplateEngine::new();
        let domain = OperatorDomain::default();
        let schemas = SchemaCache::default();
        let compiler = ProviderCompiler {
            domain: &domain,
            templates: &templates,
            schemas: &schemas,
        };
        let catalog = ProviderCatalog::build(providers, &compiler);
        Self {
            catalog,
            templates,
            domain,
        }
    }

    fn resolve(&self, claim: &ResourceClaim) -> Result<ResolvedClaim, ResolveError> {
        resolve_claim(&ResolveInput {
            claim,
            handle: None,
            catalog: &self.catalog,
            templates: &self.templates,
            domain: &self.domain,
            now: now(),
        })
    }
}

const INIT: &str = "poolboy.gpte.redhat.com/resource-claim-init-timestamp";

#[test]
fn a_claim_needs_exactly_one_of_provider_and_resources() {
    let fixture = Fixture::new(vec![configmap()]);
    let both = claim(json!({"spec": {"provider": {"name": "lab"}, "resources": [{}]}}));
    let neither = claim(json!({"spec": {}}));
    for claim in [both, neither] {
        let error = fixture.resolve(&claim).expect_err("invalid shape");
        assert!(matches!(error, ResolveError::Claim(_)), "{error}");
    }
}

#[test]
fn a_missing_provider_is_named_and_not_recorded() {
    let fixture = Fixture::new(vec![configmap()]);
    let claim = claim(json!({"spec": {"provider": {"name": "nope"}}}));
    let error = fixture.resolve(&claim).expect_err("missing provider");
    assert!(error.to_string().contains("nope"), "{error}");
}

#[test]
fn the_provider_of_a_provider_claim_is_immutable_once_recorded() {
    let fixture = Fixture::new(vec![lab()]);
    let claim = claim(json!({
        "spec": {"provider": {"name": "lab", "parameterValues": {"seats": 2}}},
        "status": {"provider": {"name": "other"}},
    }));
    let error = fixture.resolve(&claim).expect_err("immutable");
    assert!(error.to_string().contains("immutable"), "{error}");
}

#[test]
fn a_valid_provider_claim_gets_effective_values_resources_and_the_annotation() {
    let fixture = Fixture::new(vec![lab()]);
    let claim =
        claim(json!({"spec": {"provider": {"name": "lab", "parameterValues": {"seats": 2}}}}));
    let resolved = fixture.resolve(&claim).expect("resolves");
    assert!(resolved.is_valid(), "{:?}", resolved.problems);
    let values = json!({"seats": 2, "region": "east"});
    // Δ B20: the handle gets every effective value, defaults included.
    let effective = resolved
        .effective_provider
        .as_ref()
        .expect("provider claim");
    assert_eq!(json!(effective.parameter_values), values);
    let status = resolved.status_provider.as_ref().expect("status.provider");
    assert_eq!(status.name, "lab");
    assert_eq!(json!(status.parameter_values), values);
    assert_eq!(status.validation_errors, None);
    assert_eq!(resolved.resources.len(), 1);
    assert_eq!(
        resolved.resources[0].template,
        json!({"data": {"region": "east"}})
    );
    let planned = resolved.status_resources.as_deref().expect("planned");
    assert_eq!(planned[0].name.as_deref(), Some("lab"));
    assert_eq!(planned[0].provider.name, "lab");
    // §6.3: a provider claim's initialisation is the annotation alone.
    let init = resolved
        .initialisation
        .as_ref()
        .expect("not initialised yet");
    assert_eq!(
        init["metadata"]["annotations"][INIT],
        "2026-11-21T12:00:00Z"
    );
    assert!(init.get("spec").is_none());
}

/// §7 steps 3–4: a claim waiting for approval (none asked yet, pending or rejected) is not
/// initialised; once approved, it is.
#[test]
fn a_claim_is_initialised_once_approved_not_while_it_waits() {
    let fixture = Fixture::new(vec![provider_with_spec(
        "approved",
        json!({
            "override": {"apiVersion": "v1", "kind": "ConfigMap"},
            "approval": {"required": true},
        }),
    )]);
    let with_approval = |approval: Value| {
        let mut status = json!({});
        if !approval.is_null() {
            status["approval"] = approval;
        }
        claim(json!({"spec": {"provider": {"name": "approved"}}, "status": status}))
    };
    for waiting in [
        Value::Null,
        json!({"state": "pending"}),
        json!({"state": "rejected"}),
    ] {
        let resolved = fixture
            .resolve(&with_approval(waiting.clone()))
            .expect("resolves");
        assert_eq!(resolved.initialisation, None, "approval {waiting}");
        assert_ne!(resolved.approval, ApprovalGate::Open, "approval {waiting}");
    }
    let resolved = fixture
        .resolve(&with_approval(json!({"state": "approved"})))
        .expect("resolves");
    let init = resolved.initialisation.expect("initialised once approved");
    assert_eq!(
        init["metadata"]["annotations"][INIT],
        "2026-11-21T12:00:00Z"
    );
}

#[test]
fn invalid_parameters_are_recorded_and_keep_the_last_validated_values() {
    let fixture = Fixture::new(vec![lab()]);
    let claim = claim(json!({
        "spec": {"provider": {"name": "lab", "parameterValues": {"seats": 20, "colour": "red"}}},
        "status": {"provider": {"name": "lab", "parameterValues": {"seats": 20, "region": "east"}}},
    }));
    let resolved = fixture.resolve(&claim).expect("resolves");
    assert!(!resolved.is_valid());
    let status = resolved.status_provider.as_ref().expect("status.provider");
    assert_eq!(
        status.validation_errors.as_deref(),
        Some(&["No such parameter colour.".to_owned()][..])
    );
    assert_eq!(
        json!(status.parameter_values),
        json!({"seats": 20, "region": "east"})
    );
    assert!(resolved.resources.is_empty());
    assert!(resolved.effective_provider.is_none());
    assert_eq!(
        resolved.problems,
        vec!["spec.provider.parameterValues: No such parameter colour.".to_owned()]
    );

    let missing = self::claim(json!({"spec": {"provider": {"name": "lab"}}}));
    let resolved = fixture.resolve(&missing).expect("resolves");
    assert!(
        resolved
            .problems
            .iter()
            .any(|p| p.ends_with("Parameter seats is required.")),
        "{:?}",
        resolved.problems
    );
    let failing = self::claim(
        json!({"spec": {"provider": {"name": "lab", "parameterValues": {"seats": 12}}}}),
    );
    let resolved = fixture.resolve(&failing).expect("resolves");
    assert!(
        resolved
            .problems
            .iter()
            .any(|p| p.ends_with("Parameter seats failed check: few seats")),
        "{:?}",
        resolved.problems
    );
}

#[test]
fn initialising_a_match_claim_writes_defaults_without_overwriting() {
    let fixture = Fixture::new(vec![configmap()]);
    let claim = claim(json!({"spec": {"resources": [{
        "name": "config",
        "template": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"owner": "me"}},
    }]}}));
    let resolved = fixture.resolve(&claim).expect("resolves");
    assert!(resolved.is_valid(), "{:?}", resolved.problems);
    let init = resolved.initialisation.as_ref().expect("initialises");
    assert_eq!(
        init["metadata"]["annotations"][INIT],
        "2026-11-21T12:00:00Z"
    );
    let written = &init["spec"]["resources"][0];
    assert_eq!(written["name"], "config");
    assert_eq!(
        written["provider"],
        json!({"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceProvider",
               "name": "configmap", "namespace": "poolboy"})
    );
    // The user's owner stays; the schema's default size is added.
    assert_eq!(
        written["template"]["data"],
        json!({"owner": "me", "size": "small"})
    );
    assert_eq!(resolved.resources[0].template["data"]["size"], "small");
    assert_eq!(
        resolved.claim.spec.resources.as_ref().expect("resources")[0].template,
        Some(written["template"].clone())
    );
    let planned = resolved.status_resources.as_deref().expect("planned");
    assert_eq!(planned[0].validation_error, None);
    assert_eq!(planned[0].provider.name, "configmap");
}

#[test]
fn an_initialised_claim_is_not_defaulted_again() {
    let fixture = Fixture::new(vec![configmap()]);
    let claim = claim(json!({
        "metadata": {"name": "c", "namespace": "user", "annotations": {INIT: "2025-11-21T00:00:00Z"}},
        "spec": {"resources": [{"template": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}}}]},
    }));
    let resolved = fixture.resolve(&claim).expect("resolves");
    assert!(resolved.is_valid(), "{:?}", resolved.problems);
    assert!(resolved.initialisation.is_none());
    // Neither the provider default (owner) nor the schema default (size) comes back.
    assert_eq!(
        resolved.resources[0].template,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}})
    );
}

/// The claim pass goes on with what it resolved after writing the initialisation, without a
/// pass on the written claim (`controller::write::merge_continued`): the written claim resolves
/// to the same, and is not initialised again.
#[test]
fn a_claim_resolves_to_the_same_once_its_initialisation_is_written() {
    let fixture = Fixture::new(vec![configmap(), lab()]);
    let claims = [
        claim(json!({"spec": {"resources": [{"name": "config",
            "template": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"owner": "me"}}}]}})),
        claim(json!({"spec": {"resources": [{
            "template": {"apiVersion": "v1", "kind": "ConfigMap"}}]}})),
        claim(json!({"spec": {"provider": {"name": "lab", "parameterValues": {"seats": 2}}}})),
    ];
    for claim in claims {
        let first = fixture.resolve(&claim).expect("resolves");
        assert!(first.is_valid(), "{:?}", first.problems);
        let patch = first.initialisation.as_ref().expect("initialises");
        let mut written = serde_json::to_value(&claim).expect("serialises");
        json_patch::merge(&mut written, patch);
        let written: ResourceClaim = serde_json::from_value(written).expect("a claim");
        let again = fixture.resolve(&written).expect("resolves");
        assert_eq!(again.initialisation, None);
        assert_eq!(again.resources, first.resources);
        assert_eq!(again.status_resources, first.status_resources);
        assert_eq!(again.problems, first.problems);
        assert_eq!(
            serde_json::to_value(&again.claim.spec).expect("serialises"),
            serde_json::to_value(&first.claim.spec).expect("serialises"),
        );
    }
}

#[test]
fn template_failures_go_to_their_resource_entry() {
    let fixture = Fixture::new(vec![configmap()]);
    let schema_failure = claim(json!({"spec": {"resources": [
        {"template": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"n": 1}}},
    ]}}));
    let resolved = fixture.resolve(&schema_failure).expect("resolves");
    assert!(!resolved.is_valid());
    let planned = resolved.status_resources.as_deref().expect("planned");
    assert!(planned[0].validation_error.is_some());
    assert!(resolved.problems[0].starts_with("spec.resources[0]: "));
    assert!(resolved.resources.is_empty());

    let check_failure = claim(json!({"spec": {"resources": [
        {"template": {"apiVersion": "v1", "kind": "ConfigMap",
                      "data": {"a": "1", "b": "2", "c": "3"}}},
    ]}}));
    let resolved = fixture.resolve(&check_failure).expect("resolves");
    let planned = resolved.status_resources.as_deref().expect("planned");
    assert_eq!(
        planned[0].validation_error.as_deref(),
        Some("Validation check failed: data is small")
    );
}

#[test]
fn a_template_no_provider_matches_is_an_error() {
    let fixture = Fixture::new(vec![configmap()]);
    let claim = claim(json!({"spec": {"resources": [{"template": {"kind": "Secret"}}]}}));
    let error = fixture.resolve(&claim).expect_err("no match");
    assert!(error.to_string().contains("spec.resources[0]"), "{error}");
}

#[test]
fn creation_is_disabled_by_the_claim_or_any_provider() {
    let mut disabled = configmap();
    disabled.spec.disable_creation = Some(true);
    let template = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    let allowed = Fixture::new(vec![configmap()]);
    let plain = claim(json!({"spec": {"resources": [{"template": template}]}}));
    assert!(
        allowed
            .resolve(&plain)
            .expect("resolves")
            .creation_allowed()
    );
    let by_claim =
        claim(json!({"spec": {"disableCreation": true, "resources": [{"template": template}]}}));
    assert!(
        !allowed
            .resolve(&by_claim)
            .expect("resolves")
            .creation_allowed()
    );
    let by_provider = Fixture::new(vec![disabled]);
    assert!(
        !by_provider
            .resolve(&plain)
            .expect("resolves")
            .creation_allowed()
    );
}

#[test]
fn a_provider_claim_takes_its_lifespan_from_its_own_provider_only() {
    let mut lab = lab();
    lab.spec.override_ = None;
    lab.spec.template = None;
    lab.spec.linked_resource_providers = Some(vec![
        serde_json::from_value(json!({"name": "configmap"})).expect("link"),
    ]);
    let fixture = Fixture::new(vec![lab, configmap()]);
    let claim =
        claim(json!({"spec": {"provider": {"name": "lab", "parameterValues": {"seats": 1}}}}));
    let resolved = fixture.resolve(&claim).expect("resolves");
    assert!(resolved.is_valid(), "{:?}", resolved.problems);
    assert_eq!(resolved.resource_providers.len(), 1);
    assert_eq!(resolved.resource_providers[0].name(), "configmap");
    let names: Vec<&str> = resolved
        .lifespan_providers()
        .into_iter()
        .map(CompiledProvider::name)
        .collect();
    assert_eq!(names, ["lab"]);
}

#[test]
fn the_handle_name_of_a_claim_is_stable_and_valid() {
    let a = claim_handle_name("6f1c7f5e-0000-4000-8000-000000000001");
    let b = claim_handle_name("6f1c7f5e-0000-4000-8000-000000000002");
    assert_eq!(a, claim_handle_name("6f1c7f5e-0000-4000-8000-000000000001"));
    assert_ne!(a, b);
    for name in [a, b] {
        let suffix = name.strip_prefix("guid-").expect("guid- prefix");
        assert_eq!(suffix.len(), 5);
        assert!(suffix.bytes().all(|c| NAME_ALPHABET.contains(&c)), "{name}");
    }
}

proptest::proptest! {
    #[test]
    fn handle_names_always_fit_the_crd_pattern(uid in ".{0,64}") {
        let name = claim_handle_name(&uid);
        proptest::prop_assert!(name.starts_with("guid-"));
        proptest::prop_assert!(name[5..].bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
        proptest::prop_assert_eq!(name.len(), 10);
    }
}

/// An unbound pool handle holding one ConfigMap of `configmap()`.
fn pool_handle(name: &str, pool: &str, data: Value) -> ResourceHandle {
    serde_json::from_value(json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceHandle",
        "metadata": {"name": name, "namespace": "poolboy",
                     "creationTimestamp": "2026-11-21T10:00:00Z"},
        "spec": {
            "resourcePool": {"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourcePool",
                             "name": pool, "namespace": "poolboy"},
            "resources": [{
                "provider": {"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceProvider",
                             "name": "configmap", "namespace": "poolboy"},
                "template": {"apiVersion": "v1", "kind": "ConfigMap", "data": data},
            }],
            "lifespan": {"default": "2h", "relativeMaximum": "{{ '3h' }}", "end": "2026-11-21T13:00:00Z"},
        },
    }))
    .expect("valid handle")
}

fn configmap_claim(annotations: Value) -> ResourceClaim {
    claim(json!({
        "metadata": {"name": "c", "namespace": "user", "uid": "u-1",
                     "creationTimestamp": "2026-11-21T11:00:00Z", "annotations": annotations},
        "spec": {"resources": [{"name": "config",
                                "template": {"apiVersion": "v1", "kind": "ConfigMap",
                                             "data": {"color": "blue"}}}]},
    }))
}

#[test]
fn the_requested_pool_is_the_claims_pool_annotation() {
    let domain = OperatorDomain::default();
    let plain = configmap_claim(json!({}));
    assert_eq!(requested_pool(&plain.metadata, &domain), None);
    let asking = configmap_claim(json!({"poolboy.gpte.redhat.com/resource-pool-name": "b"}));
    assert_eq!(requested_pool(&asking.metadata, &domain), Some("b"));
}

#[test]
fn bind_candidates_compare_under_match_ignore_and_keep_to_the_requested_pool() {
    let fixture = Fixture::new(vec![configmap()]);
    let resolved = fixture
        .resolve(&configmap_claim(json!({})))
        .expect("resolves");
    // /data is ignored by the provider: both handles fit; `b` is older by name only.
    let handles = [
        pool_handle("guid-a", "a", json!({"owner": "x"})),
        pool_handle("guid-b", "b", json!({})),
    ];
    let names = |candidates: Vec<BindCandidate<'_>>| -> Vec<String> {
        candidates
            .iter()
            .map(|c| c.handle.metadata.name.clone().unwrap_or_default())
            .collect()
    };
    let all = resolved
        .bind_candidates(None, &handles, now())
        .expect("matches");
    assert_eq!(names(all), ["guid-a", "guid-b"]);
    let from_b = resolved
        .bind_candidates(Some("b"), &handles, now())
        .expect("matches");
    assert_eq!(names(from_b), ["guid-b"]);
    // A template difference outside matchIgnore: no candidate.
    let mut labelled = pool_handle("guid-c", "a", json!({}));
    if let Some(resources) = labelled.spec.resources.as_mut() {
        resources[0].template = Some(json!({"apiVersion": "v1", "kind": "Secret"}));
    }
    let none = resolved
        .bind_candidates(None, [&labelled], now())
        .expect("matches");
    assert!(none.is_empty());
}

#[test]
fn the_bind_carries_the_claims_edits_guarded_by_the_template_it_merges_into() {
    let fixture = Fixture::new(vec![configmap()]);
    let resolved = fixture
        .resolve(&configmap_claim(json!({})))
        .expect("resolves");
    let handle = pool_handle("guid-a", "a", json!({"pool": "yes"}));
    let plan = resolved
        .bind_plan(&handle, &fixture.templates, &fixture.domain, now())
        .expect("binds");
    let ops = json!(plan.patch);
    let ops = ops.as_array().expect("ops");
    let template_op = ops
        .iter()
        .position(|op| op["op"] == "add" && op["path"] == "/spec/resources/0/template")
        .expect("the claim's template goes with the bind");
    // Merged into the pool's template: the claim's (defaulted) data over the pool's.
    let data = &ops[template_op]["value"]["data"];
    assert_eq!(
        (&data["pool"], &data["color"]),
        (&json!("yes"), &json!("blue"))
    );
    assert_eq!(
        ops[template_op - 1],
        json!({"op": "test", "path": "/spec/resources/0/template",
               "value": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"pool": "yes"}}})
    );

    // Read back, the bound handle needs no further propagation.
    // The API server reads a missing field as null in a `test`; json_patch does not.
    let changes: Vec<_> = plan
        .patch
        .0
        .iter()
        .filter(|op| !op_is_test_of_absent(op))
        .cloned()
        .collect();
    let mut document = serde_json::to_value(&handle).expect("handle");
    json_patch::patch(&mut document, &changes).expect("applies to the handle it was made for");
    let bound: ResourceHandle = serde_json::from_value(document).expect("handle");
    let propagation = resolved
        .propagation(
            &resolved.claim,
            &bound,
            &fixture.templates,
            &fixture.domain,
            now(),
        )
        .expect("propagates");
    assert!(propagation.patch.0.is_empty(), "{:?}", propagation.patch);

    // A copy whose template changed since: the guard fails the bind.
    let mut stale = serde_json::to_value(pool_handle("guid-a", "a", json!({"pool": "edited"})))
        .expect("handle");
    assert!(json_patch::patch(&mut stale, &changes).is_err());
}

/// A `test` that a field is null: the API server passes it for a missing field.
fn op_is_test_of_absent(op: &json_patch::PatchOperation) -> bool {
    matches!(op, json_patch::PatchOperation::Test(test) if test.value.is_null())
}

#[test]
fn the_bind_plan_and_propagation_evaluate_the_handles_lifespan_for_the_claim() {
    let fixture = Fixture::new(vec![configmap()]);
    let resolved = fixture
        .resolve(&configmap_claim(json!({})))
        .expect("resolves");
    let handle = pool_handle("guid-a", "a", json!({}));
    let plan = resolved
        .bind_plan(&handle, &fixture.templates, &fixture.domain, now())
        .expect("binds");
    let patch = json!(plan.patch);
    assert_eq!(
        patch[0],
        json!({"op": "test", "path": "/spec/resourceClaim", "value": null})
    );
    // The pool's default counts from the bind.
    assert!(
        patch
            .as_array()
            .expect("ops")
            .iter()
            .any(|op| op["path"] == "/spec/lifespan/end" && op["value"] == "2026-11-21T14:00:00Z"),
        "{patch}"
    );

    // A requested end beyond the templated relativeMaximum (3h) is clamped on propagation.
    let mut bound = handle.clone();
    bound.spec.resource_claim = Some(crate::core::handle::new::claim_reference(
        &resolved.claim,
        &fixture.domain,
    ));
    let mut claim = resolved.claim.clone();
    claim.spec.lifespan =
        Some(serde_json::from_value(json!({"end": "2026-11-22T00:00:00Z"})).expect("lifespan"));
    let propagation = resolved
        .propagation(&claim, &bound, &fixture.templates, &fixture.domain, now())
        .expect("propagates");
    assert_eq!(
        propagation
            .rewrite_requested_end
            .map(format_timestamp)
            .as_deref(),
        Some("2026-11-21T15:00:00Z")
    );

    // A handle lifespan template that fails is the claim's error, naming the handle.
    let mut broken = handle;
    if let Some(lifespan) = broken.spec.lifespan.as_mut() {
        lifespan.relative_maximum = Some("{{ nowhere(".to_owned());
    }
    let error = resolved
        .bind_plan(&broken, &fixture.templates, &fixture.domain, now())
        .unwrap_err();
    assert!(matches!(error, ResolveError::LifespanValue(_)), "{error}");
    assert!(
        error
            .to_string()
            .contains("ResourceHandle guid-a spec.lifespan.relativeMaximum"),
        "{error}"
    );
}

#[test]
fn a_new_handle_holds_the_claims_resources_and_its_providers_lifespan() {
    let mut configmap = configmap();
    configmap.spec.lifespan =
        Some(serde_json::from_value(json!({"default": "{{ '2h' }}"})).expect("lifespan"));
    let fixture = Fixture::new(vec![configmap]);
    let resolved = fixture
        .resolve(&configmap_claim(json!({})))
        .expect("resolves");
    let created = resolved
        .new_handle(&fixture.templates, &fixture.domain, "poolboy", now())
        .expect("created");
    let handle = json!(created.handle);
    assert_eq!(handle["metadata"]["namespace"], "poolboy");
    assert_eq!(handle["spec"]["resourceClaim"]["name"], "c");
    assert_eq!(handle["spec"]["resources"][0]["name"], "config");
    // §6.3 defaults reached the handle.
    assert_eq!(
        handle["spec"]["resources"][0]["template"]["data"],
        json!({"color": "blue", "owner": "unknown", "size": "small"})
    );
    assert_eq!(handle["spec"]["lifespan"]["end"], "2026-11-21T14:00:00Z");

    let mut broken = self::configmap();
    broken.spec.lifespan =
        Some(serde_json::from_value(json!({"default": "soon"})).expect("lifespan"));
    let fixture = Fixture::new(vec![broken]);
    let resolved = fixture
        .resolve(&configmap_claim(json!({})))
        .expect("resolves");
    let error = resolved
        .new_handle(&fixture.templates, &fixture.domain, "poolboy", now())
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("ResourceProvider configmap spec.lifespan.default"),
        "{error}"
    );
}

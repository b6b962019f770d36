use chrono::TimeDelta;
use serde_json::json;

use super::*;
use crate::core::lifespan::EvaluatedInterval;
use crate::core::test_fixtures::{claim, now, pool, provider, provider_ref};

fn domain() -> OperatorDomain {
    OperatorDomain::default()
}

fn desired(name: &str, provider: &str, template: Value) -> DesiredResource {
    DesiredResource {
        name: name.into(),
        provider: provider_ref(provider),
        template,
    }
}

fn interval(text: &str, value: TimeDelta) -> Option<EvaluatedInterval> {
    Some(EvaluatedInterval::new(text, value))
}

#[test]
fn a_handle_for_a_provider_claim() {
    let claim = claim("metadata: {name: my-lab, namespace: user1}\nspec: {provider: {name: lab}}");
    let resources = [desired("lab", "lab", json!({"spec": {"size": 4}}))];
    let lifespans = [EvaluatedLifespan {
        default: interval("4h", TimeDelta::hours(4)),
        maximum: interval("{{ '2d' }}", TimeDelta::days(2)),
        relative_maximum: interval("1d", TimeDelta::days(1)),
    }];
    let input = ClaimHandleInput {
        claim: &claim,
        provider: Some(ProviderParameters {
            name: "lab".into(),
            parameter_values: Some(serde_json::Map::from_iter([("size".to_owned(), json!(4))])),
        }),
        resources: &resources,
        lifespans: &lifespans,
    };
    let created = handle_for_claim(&input, &domain(), "poolboy", now()).unwrap();
    assert_eq!(created.rewrite_requested_end, None);
    assert_eq!(
        serde_json::to_value(&created.handle).unwrap(),
        json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1",
            "kind": "ResourceHandle",
            "metadata": {
                "finalizers": ["poolboy.gpte.redhat.com"],
                "generateName": "guid-",
                "labels": {
                    "poolboy.gpte.redhat.com/resource-claim-name": "my-lab",
                    "poolboy.gpte.redhat.com/resource-claim-namespace": "user1",
                },
                "namespace": "poolboy",
            },
            "spec": {
                "lifespan": {
                    "default": "4h",
                    "end": "2026-11-21T16:00:00Z",
                    "maximum": "{{ '2d' }}",
                    "relativeMaximum": "1d",
                },
                "provider": {"name": "lab", "parameterValues": {"size": 4}},
                "resourceClaim": {
                    "apiVersion": "poolboy.gpte.redhat.com/v1",
                    "kind": "ResourceClaim",
                    "name": "my-lab",
                    "namespace": "user1",
                },
                "resources": [{
                    "name": "lab",
                    "provider": provider_ref("lab"),
                    "template": {"spec": {"size": 4}},
                }],
            },
        })
    );
}

#[test]
fn a_handle_for_a_resources_claim_takes_the_tightest_lifespan() {
    let claim = claim(
        "metadata: {name: c, namespace: user1}\nspec: {resources: [{}, {}], lifespan: {end: '2026-11-25T12:00:00Z'}}",
    );
    // An unnamed resource and an empty template are left out of the entry.
    let resources = [
        desired("", "a", json!({})),
        desired("db", "b", json!({"kind": "Secret"})),
    ];
    let lifespans = [
        EvaluatedLifespan {
            default: interval("2h", TimeDelta::hours(2)),
            maximum: interval("3d", TimeDelta::days(3)),
            relative_maximum: None,
        },
        EvaluatedLifespan {
            default: interval("1h30m", TimeDelta::minutes(90)),
            maximum: interval("{{ m }}", TimeDelta::days(5)),
            relative_maximum: interval("1d", TimeDelta::days(1)),
        },
    ];
    let input = ClaimHandleInput {
        claim: &claim,
        provider: None,
        resources: &resources,
        lifespans: &lifespans,
    };
    let created = handle_for_claim(&input, &domain(), "ops", now()).unwrap();
    let handle = serde_json::to_value(&created.handle).unwrap();
    assert_eq!(handle["metadata"]["namespace"], "ops");
    assert!(handle["spec"].get("provider").is_none());
    assert_eq!(
        handle["spec"]["resources"],
        json!([
            {"provider": provider_ref("a")},
            {"name": "db", "provider": provider_ref("b"), "template": {"kind": "Secret"}},
        ])
    );
    // The requested end (4 days away) is clamped to now + relativeMaximum, and the claim's
    // request is rewritten so that it does not slide.
    assert_eq!(
        handle["spec"]["lifespan"],
        json!({
            "default": "1h30m",
            "end": "2026-11-22T12:00:00Z",
            "maximum": "3d",
            "relativeMaximum": "1d",
        })
    );
    assert_eq!(
        created.rewrite_requested_end,
        Some("2026-11-22T12:00:00Z".parse().unwrap())
    );
}

#[test]
fn a_handle_without_any_lifespan_has_no_lifespan() {
    let claim = claim("metadata: {name: c}\nspec: {resources: [{}]}");
    let resources = [desired("", "a", json!({"kind": "Secret"}))];
    let input = ClaimHandleInput {
        claim: &claim,
        provider: None,
        resources: &resources,
        lifespans: &[EvaluatedLifespan::default()],
    };
    let created = handle_for_claim(&input, &domain(), "poolboy", now()).unwrap();
    assert_eq!(created.handle.spec.lifespan, None);
}

const POOL: &str = r#"
metadata: {name: gold, namespace: pools}
spec:
  minAvailable: 2
  preferenceScore: 0
  resourceLabels: {tier: gold}
  resourceAnnotations: {note: pooled}
  vars: {color: gold}
  resources:
  - name: config
    provider: {apiVersion: poolboy.gpte.redhat.com/v1, kind: ResourceProvider, name: configmap, namespace: poolboy}
    template: {data: {owner: unknown}}
"#;

#[test]
fn a_pool_handle_carries_the_pool() {
    let pool = pool(POOL);
    let handle = handle_for_pool(&pool, None, None, &domain(), now()).unwrap();
    assert_eq!(
        serde_json::to_value(&handle).unwrap(),
        json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1",
            "kind": "ResourceHandle",
            "metadata": {
                "finalizers": ["poolboy.gpte.redhat.com"],
                "generateName": "guid-",
                "labels": {
                    "poolboy.gpte.redhat.com/resource-pool-name": "gold",
                    "poolboy.gpte.redhat.com/resource-pool-namespace": "pools",
                },
                "namespace": "pools",
            },
            "spec": {
                // Copied when set, so a score of 0 is copied too (Δ§2.5).
                "preferenceScore": 0.0,
                "resourceAnnotations": {"note": "pooled"},
                "resourceLabels": {"tier": "gold"},
                "resourcePool": {
                    "apiVersion": "poolboy.gpte.redhat.com/v1",
                    "kind": "ResourcePool",
                    "name": "gold",
                    "namespace": "pools",
                },
                "resources": [{
                    "name": "config",
                    "provider": provider_ref("configmap"),
                    "template": {"data": {"owner": "unknown"}},
                }],
                "vars": {"color": "gold"},
            },
        })
    );
}

#[test]
fn a_scaling_labels_the_pool_handle() {
    let handle = handle_for_pool(&pool(POOL), None, Some("burst"), &domain(), now()).unwrap();
    let labels = handle.metadata.labels.unwrap();
    assert_eq!(
        labels["poolboy.gpte.redhat.com/resource-pool-scaling-name"],
        "burst"
    );
    assert_eq!(labels.len(), 3);
}

fn provider_lifespan() -> LifespanSettings {
    provider("metadata: {name: p}\nspec: {lifespan: {default: 2h, maximum: 3d, relativeMaximum: 1d, unclaimed: 30m}}")
            .spec
            .lifespan
            .unwrap()
}

#[test]
fn a_pool_lifespan_replaces_the_provider_lifespan() {
    let mut pool = pool(POOL);
    pool.spec.provider = Some(ProviderParameters {
        name: "p".into(),
        parameter_values: None,
    });
    pool.spec.resources = None;
    pool.spec.lifespan =
        Some(serde_json::from_value(json!({"default": "1h", "unclaimed": "2h"})).unwrap());
    let handle =
        handle_for_pool(&pool, Some(&provider_lifespan()), None, &domain(), now()).unwrap();
    assert_eq!(
        json!(handle.spec.lifespan),
        json!({"default": "1h", "end": "2026-11-21T14:00:00Z"})
    );
    assert_eq!(json!(handle.spec.provider), json!({"name": "p"}));
    assert_eq!(handle.spec.resources, None);
}

#[test]
fn a_provider_pool_without_lifespan_takes_the_provider_lifespan() {
    let mut pool = pool(POOL);
    pool.spec.provider = Some(ProviderParameters {
        name: "p".into(),
        parameter_values: None,
    });
    let handle =
        handle_for_pool(&pool, Some(&provider_lifespan()), None, &domain(), now()).unwrap();
    // Each field to its own key (Poolboy wrote relativeMaximum into maximum, Q12).
    assert_eq!(
        json!(handle.spec.lifespan),
        json!({
            "default": "2h",
            "end": "2026-11-21T12:30:00Z",
            "maximum": "3d",
            "relativeMaximum": "1d",
        })
    );
}

#[test]
fn a_resources_pool_ignores_a_provider_lifespan() {
    let handle = handle_for_pool(
        &pool(POOL),
        Some(&provider_lifespan()),
        None,
        &domain(),
        now(),
    )
    .unwrap();
    assert_eq!(handle.spec.lifespan, None);
}

#[test]
fn a_bad_unclaimed_interval_is_an_error() {
    let mut pool = pool(POOL);
    pool.spec.lifespan = Some(serde_json::from_value(json!({"unclaimed": "whenever"})).unwrap());
    let error = handle_for_pool(&pool, None, None, &domain(), now()).unwrap_err();
    assert!(error.to_string().contains("whenever"), "{error}");
}

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::core::handle::new::handle_for_pool;
use crate::core::test_fixtures::{now, pool_with_spec as pool};

/// The handle the pool of `spec` makes.
fn made(spec: Value) -> ResourceHandle {
    let domain = OperatorDomain::new(DOMAIN);
    handle_for_pool(&pool(spec), None, None, &domain, now()).expect("a pool handle")
}

fn handle(spec: Value, annotations: Value) -> ResourceHandle {
    serde_json::from_value(json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceHandle",
        "metadata": {"name": "guid-a", "namespace": "poolboy", "annotations": annotations},
        "spec": spec,
    }))
    .expect("valid handle")
}

fn providers(spec: Value) -> BTreeMap<String, Value> {
    BTreeMap::from([("cm".to_owned(), spec)])
}

const DOMAIN: &str = "poolboy.gpte.redhat.com";

#[test]
fn the_version_follows_the_templates_and_the_providers_not_the_sizes() {
    let spec = json!({"minAvailable": 1, "provider": {"name": "cm", "parameterValues": {"a": 1}}});
    let base = pool_version(&made(spec.clone()), &providers(json!({"x": 1})));
    assert_eq!(base.len(), 16);
    let mut resized = spec.clone();
    resized["minAvailable"] = json!(5);
    resized["maxUnready"] = json!(2);
    assert_eq!(
        pool_version(&made(resized), &providers(json!({"x": 1}))),
        base,
        "sizing is not content"
    );
    let mut reparameterised = spec.clone();
    reparameterised["provider"]["parameterValues"]["a"] = json!(2);
    assert_ne!(
        pool_version(&made(reparameterised), &providers(json!({"x": 1}))),
        base
    );
    assert_ne!(
        pool_version(&made(spec.clone()), &providers(json!({"x": 2}))),
        base,
        "a provider edit is a new version"
    );
    let mut labelled = spec;
    labelled["resourceLabels"] = json!({"team": "a"});
    assert_ne!(
        pool_version(&made(labelled), &providers(json!({"x": 1}))),
        base
    );
}

#[test]
fn a_handle_carries_its_version_or_is_judged_by_its_content() {
    let domain = OperatorDomain::new(DOMAIN);
    let spec = json!({"resources": [{"provider": {"apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceProvider", "name": "cm", "namespace": "poolboy"},
        "template": {"data": {"k": "v"}}}]});
    let providers = providers(json!({"x": 1}));
    let version = pool_version(&made(spec.clone()), &providers);

    let stamped = handle(
        json!({}),
        json!({"poolboy.gpte.redhat.com/resource-pool-version": "0123456789abcdef"}),
    );
    assert_eq!(
        handle_version(&stamped, &providers, &domain),
        "0123456789abcdef"
    );

    // Made by Poolboy, no annotation: the same content is the same version; a reference the
    // handle controller recorded is not content.
    let mut made = spec.clone();
    made["resources"][0]["reference"] = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "name": "x", "namespace": "y"});
    assert_eq!(
        handle_version(&handle(made, Value::Null), &providers, &domain),
        version
    );
    let mut edited = spec;
    edited["resources"][0]["template"]["data"]["k"] = json!("w");
    assert_ne!(
        handle_version(&handle(edited, Value::Null), &providers, &domain),
        version
    );
}

#[test]
fn a_provider_handle_is_not_judged_by_the_resources_it_generated() {
    let domain = OperatorDomain::new(DOMAIN);
    let providers = providers(json!({"x": 1}));
    let spec = json!({"provider": {"name": "cm", "parameterValues": {"a": 1}}});
    let version = pool_version(&made(spec.clone()), &providers);
    let mut generated = spec;
    generated["resources"] = json!([{"provider": {"apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceProvider", "name": "cm", "namespace": "poolboy"}}]);
    assert_eq!(
        handle_version(&handle(generated, Value::Null), &providers, &domain),
        version
    );
}

#[test]
fn the_condition_says_how_far_the_refresh_is() {
    let mut status = ResourcePoolStatus::default();
    let change = set_refresh_condition(&mut status, "v2", 3, 5, Some(2), now());
    assert_eq!(change, Change::Transitioned);
    let conditions = status.conditions.clone().unwrap_or_default();
    let condition = &conditions[0];
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.status.as_str(),
            condition.reason.as_str()
        ),
        (HANDLES_UP_TO_DATE, "False", "Refreshing")
    );
    assert!(
        condition.message.starts_with("3 of 5 unbound handles"),
        "{}",
        condition.message
    );

    let change = set_refresh_condition(&mut status, "v2", 0, 5, Some(2), now());
    assert_eq!(change, Change::Transitioned);
    let conditions = status.conditions.unwrap_or_default();
    assert_eq!(conditions[0].status, "True");
    assert_eq!(
        conditions[0].message,
        "every unbound handle is of pool version v2"
    );
}

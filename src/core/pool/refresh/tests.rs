use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::api::ResourcePool;
use crate::core::handle::new::handle_for_pool;
use crate::core::test_fixtures::{now, pool_with_spec as pool};

fn domain() -> OperatorDomain {
    OperatorDomain::new(DOMAIN)
}

/// The handle the pool of `spec` makes.
fn made(spec: Value) -> ResourceHandle {
    handle_for_pool(&pool(spec), None, None, &domain(), now()).expect("a pool handle")
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

/// The objects of `kind` exactly as Poolboy 1.17.3 wrote them on an API server: a pool of
/// three without vars, its unbound and bound handles, and their providers
/// (tests/fixtures/poolboy-1.17.3).
fn written_by_poolboy(kind: &str) -> Vec<Value> {
    let list: Value = serde_json::from_str(include_str!(
        "../../../../tests/fixtures/poolboy-1.17.3/objects.json"
    ))
    .expect("the fixture is JSON");
    list["items"]
        .as_array()
        .expect("a List")
        .iter()
        .filter(|item| item["kind"] == kind)
        .cloned()
        .collect()
}

#[test]
fn every_handle_poolboy_made_for_an_unchanged_pool_is_of_the_pool_version() {
    let pool: ResourcePool =
        serde_json::from_value(written_by_poolboy("ResourcePool")[0].clone()).expect("a pool");
    let providers: BTreeMap<String, Value> = written_by_poolboy("ResourceProvider")
        .into_iter()
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                p["spec"].clone(),
            )
        })
        .collect();
    let new = handle_for_pool(&pool, None, None, &domain(), now()).expect("a pool handle");
    let version = pool_version(&new, &provider_subset(&providers, "cm"), &domain());
    let handles: Vec<ResourceHandle> = written_by_poolboy("ResourceHandle")
        .into_iter()
        .filter(|h| h["spec"]["resourcePool"]["name"] == "pool")
        .map(|h| serde_json::from_value(h).expect("a handle"))
        .collect();
    assert_eq!(handles.len(), 5, "three unbound and two bound");
    assert!(handles.iter().all(|h| h.spec.vars == Some(Map::new())));
    for handle in &handles {
        assert_eq!(
            handle_version(handle, &provider_subset(&providers, "cm"), &domain()),
            version,
            "{}",
            handle.metadata.name.as_deref().unwrap_or_default()
        );
    }
}

/// The spec of provider `name` alone, as `provider_specs` gives the providers a handle uses.
fn provider_subset(providers: &BTreeMap<String, Value>, name: &str) -> BTreeMap<String, Value> {
    providers
        .iter()
        .filter(|(n, _)| n.as_str() == name)
        .map(|(n, spec)| (n.clone(), spec.clone()))
        .collect()
}

/// The version of the pool of `spec`, with provider `cm` of spec `{x: 1}`.
fn made_version(spec: Value) -> String {
    pool_version(&made(spec), &providers(json!({"x": 1})), &domain())
}

/// The version a handle of `spec` without a version annotation is judged to have.
fn judged(spec: Value) -> String {
    handle_version(
        &handle(spec, Value::Null),
        &providers(json!({"x": 1})),
        &domain(),
    )
}

#[test]
fn empty_and_absent_are_the_same_content_as_poolboy_reads_them() {
    let cm = json!({"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceProvider",
        "name": "cm", "namespace": "poolboy"});
    let templated = json!({"resources": [{"provider": cm, "template": {"data": {"k": "v"}}}]});
    let with_provider = json!({"provider": {"name": "cm"}});
    // (a pool's spec, a handle's spec Poolboy could have written for it)
    let alike = [
        (templated.clone(), merged(&templated, json!({"vars": {}}))),
        (
            templated.clone(),
            merged(&templated, json!({"resourceLabels": {}})),
        ),
        (
            templated.clone(),
            merged(&templated, json!({"resourceAnnotations": {}})),
        ),
        (
            json!({"resources": [{"provider": cm}]}),
            json!({"resources": [{"provider": cm, "template": {}}]}),
        ),
        (
            json!({"resources": [{"provider": cm, "template": null}]}),
            json!({"resources": [{"provider": cm}]}),
        ),
        (
            with_provider.clone(),
            json!({"provider": {"name": "cm", "parameterValues": {}}, "vars": {}}),
        ),
        (
            // Providers are found by name in the operator namespace, whatever else a
            // reference says.
            templated.clone(),
            json!({"resources": [{"provider": {"apiVersion": "poolboy.gpte.redhat.com/v1beta1",
                "kind": "Provider", "name": "cm", "namespace": "elsewhere"},
                "template": {"data": {"k": "v"}}}]}),
        ),
    ];
    for (pool_spec, handle_spec) in alike {
        assert_eq!(
            judged(handle_spec.clone()),
            made_version(pool_spec.clone()),
            "{pool_spec} and {handle_spec}"
        );
    }

    let different = [
        (
            templated.clone(),
            merged(&templated, json!({"vars": {"a": 1}})),
        ),
        (
            templated.clone(),
            merged(&templated, json!({"resourceLabels": {"a": "b"}})),
        ),
        (
            templated.clone(),
            json!({"resources": [{"provider": cm, "template": {"data": {}}}]}),
        ),
        (
            templated.clone(),
            json!({"resources": [{"name": "a", "provider": cm, "template": {"data": {"k": "v"}}}]}),
        ),
        (
            with_provider,
            json!({"provider": {"name": "cm", "parameterValues": {"a": null}}}),
        ),
    ];
    for (pool_spec, handle_spec) in different {
        assert_ne!(
            judged(handle_spec.clone()),
            made_version(pool_spec.clone()),
            "{pool_spec} and {handle_spec}"
        );
    }
}

/// `base` with the top-level fields of `extra` set.
fn merged(base: &Value, extra: Value) -> Value {
    let mut merged = base.clone();
    if let (Some(target), Value::Object(fields)) = (merged.as_object_mut(), extra) {
        target.extend(fields);
    }
    merged
}

#[test]
fn versions_stamped_by_earlier_builds_stay_valid() {
    // Digests of the normal form, as every earlier build of this broker stamped them: a
    // pool that states no empty field keeps the version its handles carry.
    let cm = json!({"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceProvider",
        "name": "cm", "namespace": "poolboy"});
    let no_providers = BTreeMap::new();
    assert_eq!(
        pool_version(
            &made(json!({"resources": [{"provider": cm, "template": {"data": {"k": "v"}}}]})),
            &no_providers,
            &domain()
        ),
        "c65bb8739807526b"
    );
    assert_eq!(
        pool_version(
            &made(json!({"provider": {"name": "cm", "parameterValues": {"a": 1}}})),
            &no_providers,
            &domain()
        ),
        "d01f539b2195cdb6"
    );
}

#[test]
fn the_version_follows_the_templates_and_the_providers_not_the_sizes() {
    let spec = json!({"minAvailable": 1, "provider": {"name": "cm", "parameterValues": {"a": 1}}});
    let base = pool_version(&made(spec.clone()), &providers(json!({"x": 1})), &domain());
    assert_eq!(base.len(), 16);
    let mut resized = spec.clone();
    resized["minAvailable"] = json!(5);
    resized["maxUnready"] = json!(2);
    assert_eq!(
        pool_version(&made(resized), &providers(json!({"x": 1})), &domain()),
        base,
        "sizing is not content"
    );
    let mut reparameterised = spec.clone();
    reparameterised["provider"]["parameterValues"]["a"] = json!(2);
    assert_ne!(
        pool_version(
            &made(reparameterised),
            &providers(json!({"x": 1})),
            &domain()
        ),
        base
    );
    assert_ne!(
        pool_version(&made(spec.clone()), &providers(json!({"x": 2})), &domain()),
        base,
        "a provider edit is a new version"
    );
    let mut labelled = spec;
    labelled["resourceLabels"] = json!({"team": "a"});
    assert_ne!(
        pool_version(&made(labelled), &providers(json!({"x": 1})), &domain()),
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
    let version = pool_version(&made(spec.clone()), &providers, &domain);

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
    let version = pool_version(&made(spec.clone()), &providers, &domain);
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

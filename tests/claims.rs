//! The claim controller on the real API server (§6, §7, Δ§3.1, Δ§3.2): it initialises and
//! validates claims, binds them to unbound handles or creates handles, mirrors handle status,
//! and cascades deletion. The handle controller is simulated where needed: tests set handle
//! status themselves, and strip a handle's finalizer to play its deletion.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use poolboy::api::{ResourceClaim, ResourceHandle, ResourcePool, ResourceProvider};
use serde_json::{Value, json};
use support::apis::Apis;
use support::objects::{self, D, condition, handle_name, initialised_at, key};
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, create, eventually, gone};

/// A provider whose `match` takes ConfigMap templates labelled `example.com/kind: config`,
/// with a default, a schema, a check and a lifespan (as `examples/provider-configmap.yaml`).
fn example_provider(name: &str) -> ResourceProvider {
    objects::provider(
        name,
        json!({
            "match": {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"labels": {"example.com/kind": "config"}}},
            "matchIgnore": ["/data(/.*)?"],
            "default": {"data": {"owner": "unknown"}},
            "override": {"apiVersion": "v1", "kind": "ConfigMap"},
            "validation": {
                "openAPIV3Schema": {
                    "type": "object",
                    "required": ["apiVersion", "kind"],
                    "properties": {
                        "data": {"type": "object", "additionalProperties": {"type": "string"}},
                    },
                },
                "checks": [{"name": "data is small", "check": "data | length < 5"}],
            },
            "updateFilters": [{"pathMatch": "/data(/.*)?"}],
            "lifespan": {"default": "2h", "maximum": "1d", "relativeMaximum": "8h"},
        }),
    )
}

/// A provider without defaults or lifespan, for handles made by the tests themselves.
fn plain_provider(name: &str, disable_creation: bool) -> ResourceProvider {
    objects::provider(
        name,
        json!({
            "override": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchIgnore": ["/data(/.*)?"],
            "disableCreation": disable_creation,
        }),
    )
}

/// A provider claim's provider with one required integer parameter.
fn parameter_provider(name: &str) -> ResourceProvider {
    objects::provider(
        name,
        json!({
            "override": {"apiVersion": "v1", "kind": "ConfigMap"},
            "template": {"definition": {"data": {"seats": "{{ seats }}"}}},
            "parameters": [{"name": "seats", "required": true,
                            "validation": {"openAPIV3Schema": {"type": "integer"}}}],
        }),
    )
}

fn config_template(data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"labels": {"example.com/kind": "config"}},
        "data": data,
    })
}

/// A resources claim with one entry; `provider` makes it explicit, else it is matched.
fn resources_claim(name: &str, provider: Option<&str>, template: Value) -> ResourceClaim {
    let mut resource = json!({"name": "config", "template": template});
    if let Some(provider) = provider {
        resource["provider"] = json!({"name": provider});
    }
    objects::claim(name, json!({"resources": [resource]}))
}

/// An unbound handle with one resource, as a pool or an administrator makes it.
fn unbound_handle(
    name: &str,
    namespace: &str,
    provider: &str,
    template: Value,
    pool: Option<&str>,
) -> ResourceHandle {
    let mut metadata = json!({"name": name});
    let mut spec = json!({"resources": [{
        "provider": objects::provider_ref(provider, namespace),
        "template": template,
    }]});
    if let Some(pool) = pool {
        metadata["labels"] = json!({
            key("resource-pool-name"): pool, key("resource-pool-namespace"): namespace,
        });
        spec["resourcePool"] = objects::reference("ResourcePool", pool, namespace);
    }
    objects::handle(metadata, spec)
}

fn invalid_message(claim: &ResourceClaim) -> Option<&str> {
    condition(claim, "Valid")
        .filter(|c| c.status == "False")
        .map(|c| c.message.as_str())
}

fn timestamp(value: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(value)
        .expect("an RFC 3339 timestamp")
        .with_timezone(&Utc)
}

fn labels(handle: &ResourceHandle) -> BTreeMap<String, String> {
    handle.metadata.labels.clone().unwrap_or_default()
}

#[tokio::test]
async fn an_explicit_provider_claim_creates_a_labelled_handle_with_a_lifespan() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    let apis = Apis::new(&env);
    apis.create_providers(vec![example_provider("configmap")])
        .await;
    let operator = TestOperator::start(env.kube_config(), &ns);
    let started = Utc::now();

    let template = config_template(json!({"color": "blue"}));
    apis.create_claim(&resources_claim("explicit", Some("configmap"), template))
        .await;
    let (claim, handle) = apis.bound("explicit").await;

    let name = handle.metadata.name.clone().unwrap_or_default();
    assert!(name.starts_with("guid-"), "{name}");
    assert_eq!(handle.metadata.finalizers, Some(vec![D.to_owned()]));
    let labels = labels(&handle);
    assert_eq!(
        labels.get(&key("resource-claim-name")).map(String::as_str),
        Some("explicit")
    );
    assert_eq!(labels.get(&key("resource-claim-namespace")), Some(&ns));
    let reference = handle
        .spec
        .resource_claim
        .as_ref()
        .expect("spec.resourceClaim");
    assert_eq!(
        json!(reference),
        json!({"apiVersion": format!("{D}/v1"), "kind": "ResourceClaim",
               "name": "explicit", "namespace": ns})
    );
    let resources = handle.spec.resources.as_deref().unwrap_or_default();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].name.as_deref(), Some("config"));
    assert_eq!(resources[0].provider.name, "configmap");
    assert_eq!(resources[0].provider.namespace, ns);
    let data = resources[0].template.as_ref().map(|t| t["data"].clone());
    assert_eq!(data, Some(json!({"color": "blue", "owner": "unknown"})));

    // §7.2: the provider's lifespan, the end two hours (the default) from now.
    let lifespan = handle.spec.lifespan.as_ref().expect("spec.lifespan");
    assert_eq!(lifespan.default.as_deref(), Some("2h"));
    assert_eq!(lifespan.maximum.as_deref(), Some("1d"));
    assert_eq!(lifespan.relative_maximum.as_deref(), Some("8h"));
    let end = timestamp(lifespan.end.as_deref().expect("an end"));
    let expected = started + chrono::TimeDelta::hours(2);
    assert!(
        (end - expected).num_seconds().abs() < 60,
        "end {end}, expected ~{expected}"
    );

    let status = claim.status.as_ref().expect("status");
    let handle_ref = status.resource_handle.as_ref().expect("resourceHandle");
    assert_eq!(
        (handle_ref.kind.as_str(), handle_ref.namespace.as_str()),
        ("ResourceHandle", ns.as_str())
    );
    let claim_lifespan = status.lifespan.as_ref().expect("status.lifespan");
    assert!(claim_lifespan.start.is_some());
    assert_eq!(claim_lifespan.end, lifespan.end);
    assert_eq!(claim_lifespan.maximum.as_deref(), Some("1d"));
    assert_eq!(
        condition(&claim, "Bound").map(|c| c.status.as_str()),
        Some("True")
    );
    assert_eq!(
        condition(&claim, "Valid").map(|c| c.status.as_str()),
        Some("True")
    );
    assert_eq!(claim.metadata.finalizers, Some(vec![D.to_owned()]));
    let entries = status.resources.as_deref().unwrap_or_default();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].name.as_deref(), Some("config"));
    assert_eq!(
        entries[0].provider.as_ref().map(|p| p.name.as_str()),
        Some("configmap")
    );

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_match_claim_is_initialised_with_defaults_in_its_spec() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    let apis = Apis::new(&env);
    apis.create_providers(vec![example_provider("configmap")])
        .await;
    let operator = TestOperator::start(env.kube_config(), &ns);

    let template = config_template(json!({"color": "green", "owner": "me"}));
    apis.create_claim(&resources_claim("matched", None, template))
        .await;
    let claim = apis
        .claim_when("matched", "initialised", |c| initialised_at(c).is_some())
        .await;
    let resource = &claim.spec.resources.as_deref().unwrap_or_default()[0];
    let provider = resource
        .provider
        .as_ref()
        .expect("the provider, written back");
    assert_eq!(provider.name, "configmap");
    assert_eq!(provider.namespace.as_deref(), Some(ns.as_str()));
    assert_eq!(provider.kind.as_deref(), Some("ResourceProvider"));
    // The default does not overwrite what the user wrote.
    let data = resource.template.as_ref().map(|t| t["data"].clone());
    assert_eq!(data, Some(json!({"color": "green", "owner": "me"})));

    let (claim, handle) = apis.bound("matched").await;
    assert_eq!(
        handle.spec.resources.as_deref().unwrap_or_default()[0]
            .provider
            .name,
        "configmap"
    );
    let entries = claim
        .status
        .as_ref()
        .and_then(|s| s.resources.clone())
        .unwrap_or_default();
    assert_eq!(
        entries[0].provider.as_ref().map(|p| p.name.as_str()),
        Some("configmap")
    );

    // A claim without `owner` gets the provider's default.
    apis.create_claim(&resources_claim(
        "defaulted",
        None,
        config_template(json!({"color": "red"})),
    ))
    .await;
    let claim = apis
        .claim_when("defaulted", "defaulted", |c| {
            c.spec.resources.as_deref().unwrap_or_default()[0]
                .template
                .as_ref()
                .is_some_and(|t| t["data"]["owner"] == "unknown")
        })
        .await;
    assert_eq!(
        claim.spec.resources.as_deref().unwrap_or_default()[0]
            .template
            .as_ref()
            .map(|t| t["data"]["color"].clone()),
        Some(json!("red"))
    );

    env.teardown([operator]).await;
}

#[tokio::test]
async fn invalid_claims_are_reported_and_do_not_disturb_a_valid_one() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    let apis = Apis::new(&env);
    apis.create_providers(vec![
        example_provider("configmap"),
        parameter_provider("lab"),
    ])
    .await;
    let operator = TestOperator::start(env.kube_config(), &ns);

    // Schema: data values must be strings.
    apis.create_claim(&resources_claim(
        "schema",
        Some("configmap"),
        config_template(json!({"n": 1})),
    ))
    .await;
    // Check: at most four data keys (the default adds `owner`).
    let crowded = json!({"a": "1", "b": "2", "c": "3", "d": "4"});
    apis.create_claim(&resources_claim(
        "check",
        Some("configmap"),
        config_template(crowded),
    ))
    .await;
    apis.create_claim(&resources_claim(
        "missing",
        Some("nowhere"),
        config_template(json!({})),
    ))
    .await;
    let parameters = objects::claim(
        "parameters",
        json!({"provider": {"name": "lab", "parameterValues": {"seats": "many", "colour": "red"}}}),
    );
    apis.create_claim(&parameters).await;
    apis.create_claim(&resources_claim(
        "fine",
        Some("configmap"),
        config_template(json!({})),
    ))
    .await;

    let schema = apis
        .claim_when("schema", "invalid", |c| invalid_message(c).is_some())
        .await;
    let entry = schema
        .status
        .as_ref()
        .and_then(|s| s.resources.clone())
        .unwrap_or_default();
    let error = entry
        .first()
        .and_then(|e| e.validation_error.clone())
        .expect("validationError");
    assert!(invalid_message(&schema).is_some_and(|m| m.starts_with("spec.resources[0]: ")));
    assert!(!error.is_empty());

    let check = apis
        .claim_when("check", "invalid", |c| invalid_message(c).is_some())
        .await;
    let entry = check
        .status
        .as_ref()
        .and_then(|s| s.resources.clone())
        .unwrap_or_default();
    assert_eq!(
        entry.first().and_then(|e| e.validation_error.as_deref()),
        Some("Validation check failed: data is small")
    );

    let missing = apis
        .claim_when("missing", "invalid", |c| invalid_message(c).is_some())
        .await;
    assert!(
        invalid_message(&missing).is_some_and(|m| m.contains("nowhere")),
        "{:?}",
        invalid_message(&missing)
    );

    let parameters = apis
        .claim_when("parameters", "invalid", |c| invalid_message(c).is_some())
        .await;
    let provider = parameters
        .status
        .as_ref()
        .and_then(|s| s.provider.clone())
        .expect("status.provider");
    let errors = provider.validation_errors.unwrap_or_default();
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("Parameter seats schema validation failed")),
        "{errors:?}"
    );
    assert!(
        errors.contains(&"No such parameter colour.".to_owned()),
        "{errors:?}"
    );

    for claim in [&schema, &check, &missing, &parameters] {
        assert_eq!(handle_name(claim), None);
        let bound = condition(claim, "Bound").expect("Bound condition");
        assert_eq!(
            (bound.status.as_str(), bound.reason.as_str()),
            ("False", "Invalid")
        );
    }
    // Each gets a Warning Event.
    for name in ["schema", "check", "missing", "parameters"] {
        env.event(name, "Warning", "InvalidClaim", TIMEOUT).await;
    }
    let (_, handle) = apis.bound("fine").await;
    assert_eq!(
        handle.spec.resource_claim.as_ref().map(|r| r.name.as_str()),
        Some("fine")
    );
    // Nothing was created for the invalid claims.
    let handles = apis
        .handles
        .list(&ListParams::default())
        .await
        .expect("handles");
    assert_eq!(handles.items.len(), 1);

    // Corrected, a claim binds.
    let fix = Patch::Merge(
        json!({"spec": {"provider": {"parameterValues": {"seats": 3, "colour": null}}}}),
    );
    apis.claims
        .patch("parameters", &PatchParams::default(), &fix)
        .await
        .expect("fix");
    let (claim, handle) = apis.bound("parameters").await;
    assert_eq!(invalid_message(&claim), None);
    let values = handle
        .spec
        .provider
        .as_ref()
        .and_then(|p| p.parameter_values.clone());
    assert_eq!(json!(values), json!({"seats": 3}));

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_claim_binds_to_a_matching_unbound_pool_handle() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    let apis = Apis::new(&env);
    apis.create_providers(vec![example_provider("configmap")])
        .await;
    let pools: Api<ResourcePool> = env.api();
    let pool = objects::pool(
        "pool",
        json!({"minAvailable": 0, "resources": [{
            "provider": objects::provider_ref("configmap", &ns),
            "template": config_template(json!({"owner": "unknown"})),
        }]}),
    );
    create(&pools, &pool).await;
    let pooled = unbound_handle(
        "guid-pooled",
        &ns,
        "configmap",
        config_template(json!({"owner": "unknown"})),
        Some("pool"),
    );
    apis.create_handle(&pooled).await;
    let operator = TestOperator::start(env.kube_config(), &ns);

    let mut claim = resources_claim("pooled", None, config_template(json!({"color": "blue"})));
    claim.metadata.annotations = Some([(key("resource-pool-name"), "pool".to_owned())].into());
    apis.create_claim(&claim).await;
    let (claim, handle) = apis.bound("pooled").await;
    assert_eq!(handle_name(&claim), Some("guid-pooled"));
    let labels = labels(&handle);
    assert_eq!(
        labels.get(&key("resource-claim-name")).map(String::as_str),
        Some("pooled")
    );
    assert_eq!(labels.get(&key("resource-claim-namespace")), Some(&ns));
    assert_eq!(
        labels.get(&key("resource-pool-name")).map(String::as_str),
        Some("pool")
    );
    assert_eq!(
        handle.spec.resource_claim.as_ref().map(|r| r.name.as_str()),
        Some("pooled")
    );
    // The claim's template reached the handle (§7 step 11).
    let template = eventually("the claim template on the handle", TIMEOUT, || async {
        let handle = apis.handles.get("guid-pooled").await.expect("handle");
        let template = handle.spec.resources.as_deref().unwrap_or_default()[0]
            .template
            .clone();
        template.filter(|t| t["data"]["color"] == "blue")
    })
    .await;
    assert_eq!(template["data"]["owner"], "unknown");
    // No handle was created.
    let handles = apis
        .handles
        .list(&ListParams::default())
        .await
        .expect("handles");
    assert_eq!(handles.items.len(), 1);
    // The broker's writes are the field manager `poolboy`'s.
    let managers = |fields: &Option<
        Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry>,
    >,
                    subresource: &str| {
        fields
            .iter()
            .flatten()
            .filter(|f| f.subresource.as_deref().unwrap_or_default() == subresource)
            .filter_map(|f| f.manager.clone())
            .collect::<Vec<_>>()
    };
    let claim = apis.claims.get("pooled").await.expect("the claim");
    assert_eq!(
        managers(&claim.metadata.managed_fields, "status"),
        ["poolboy"]
    );
    // The handle's status is written by its own reconcile, which may not have run yet.
    let handle = eventually("the handle's status written", TIMEOUT, || async {
        let handle = apis.handles.get("guid-pooled").await.ok()?;
        (!managers(&handle.metadata.managed_fields, "status").is_empty()).then_some(handle)
    })
    .await;
    assert_eq!(
        managers(&handle.metadata.managed_fields, "status"),
        ["poolboy"]
    );
    assert!(
        managers(&handle.metadata.managed_fields, "").contains(&"poolboy".to_owned()),
        "the bind is poolboy's: {:?}",
        handle.metadata.managed_fields
    );

    env.teardown([operator]).await;
}

#[tokio::test]
async fn disable_creation_waits_without_error_until_a_handle_appears() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    let apis = Apis::new(&env);
    apis.create_providers(vec![
        plain_provider("plain", false),
        plain_provider("closed", true),
    ])
    .await;
    let operator = TestOperator::start(env.kube_config(), &ns);

    let template = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}});
    let mut by_claim = resources_claim("by-claim", Some("plain"), template.clone());
    by_claim.spec.disable_creation = Some(true);
    apis.create_claim(&by_claim).await;
    apis.create_claim(&resources_claim(
        "by-provider",
        Some("closed"),
        template.clone(),
    ))
    .await;
    for name in ["by-claim", "by-provider"] {
        let claim = apis
            .claim_when(name, "waiting for a handle", |c| {
                condition(c, "Bound").is_some_and(|b| b.reason == "WaitingForHandle")
            })
            .await;
        assert_eq!(invalid_message(&claim), None);
        assert_eq!(handle_name(&claim), None);
    }
    let handles = apis
        .handles
        .list(&ListParams::default())
        .await
        .expect("handles");
    assert!(handles.items.is_empty(), "no handle is created");
    // The waiting claim says why nothing fits, in its Bound condition and an Event.
    let claim = apis.claims.get("by-claim").await.expect("claim");
    let bound = condition(&claim, "Bound").expect("Bound").message.clone();
    assert!(
        bound.ends_with("; no unbound ResourceHandle exists"),
        "{bound}"
    );
    env.event("by-claim", "Normal", "WaitingForHandle", TIMEOUT)
        .await;
    // A handle with a second resource fits neither claim.
    let mut other = unbound_handle("guid-other", &ns, "plain", template.clone(), None);
    if let Some(resources) = other.spec.resources.as_mut() {
        resources.push(resources[0].clone());
    }
    apis.create_handle(&other).await;
    apis.claim_when("by-claim", "saying why guid-other does not fit", |c| {
        condition(c, "Bound")
            .is_some_and(|b| b.reason == "WaitingForHandle" && b.message.contains("guid-other: "))
    })
    .await;

    apis.create_handle(&unbound_handle(
        "guid-plain",
        &ns,
        "plain",
        template.clone(),
        None,
    ))
    .await;
    apis.create_handle(&unbound_handle(
        "guid-closed",
        &ns,
        "closed",
        template,
        None,
    ))
    .await;
    let (claim, _) = apis.bound("by-claim").await;
    assert_eq!(handle_name(&claim), Some("guid-plain"));
    assert_eq!(
        condition(&claim, "Bound").map(|c| c.status.as_str()),
        Some("True")
    );
    let (claim, _) = apis.bound("by-provider").await;
    assert_eq!(handle_name(&claim), Some("guid-closed"));

    env.teardown([operator]).await;
}

#[tokio::test]
async fn handle_status_shows_in_the_claim_status() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    let apis = Apis::new(&env);
    apis.create_providers(vec![example_provider("configmap")])
        .await;
    let operator = TestOperator::start(env.kube_config(), &ns);

    apis.create_claim(&resources_claim(
        "mirrored",
        Some("configmap"),
        config_template(json!({})),
    ))
    .await;
    let (claim, handle) = apis.bound("mirrored").await;
    // The handle controller may already have reported the ConfigMap not ready.
    assert_ne!(claim.status.as_ref().and_then(|s| s.ready), Some(true));
    let name = handle.metadata.name.clone().unwrap_or_default();
    // Ignored by any handle controller: the test plays it.
    let ignore = Patch::Merge(json!({"metadata": {"labels": {key("ignore"): ""}}}));
    apis.handles
        .patch(&name, &PatchParams::default(), &ignore)
        .await
        .expect("label");
    let status = Patch::Merge(json!({"status": {
        "healthy": true, "ready": true, "summary": {"url": "https://example.com"},
        "resources": [{"name": "config", "healthy": true, "ready": true,
                       "reference": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "namespace": ns}}],
    }}));
    apis.handles
        .patch_status(&name, &PatchParams::default(), &status)
        .await
        .expect("status");

    let claim = apis
        .claim_when("mirrored", "ready", |c| {
            c.status.as_ref().and_then(|s| s.ready) == Some(true)
        })
        .await;
    let status = claim.status.as_ref().expect("status");
    assert_eq!(status.healthy, Some(true));
    assert_eq!(status.summary, Some(json!({"url": "https://example.com"})));
    let entry = &status.resources.as_deref().unwrap_or_default()[0];
    assert_eq!((entry.healthy, entry.ready), (Some(true), Some(true)));
    assert_eq!(
        entry.reference.as_ref().map(|r| r.name.as_str()),
        Some("cm")
    );
    assert_eq!(entry.name.as_deref(), Some("config"));
    // §7.4: first ready is recorded, and the default lifespan restarts from it.
    assert!(
        status
            .lifespan
            .as_ref()
            .and_then(|l| l.first_ready.as_ref())
            .is_some()
    );
    apis.claim_when("mirrored", "requested end set at first ready", |c| {
        c.spec
            .lifespan
            .as_ref()
            .and_then(|l| l.end.as_ref())
            .is_some()
    })
    .await;

    // Unset on the handle: removed from the claim.
    let cleared = Patch::Merge(json!({"status": {"ready": null, "summary": null}}));
    apis.handles
        .patch_status(&name, &PatchParams::default(), &cleared)
        .await
        .expect("status");
    let claim = apis
        .claim_when("mirrored", "ready cleared", |c| {
            c.status.as_ref().is_some_and(|s| s.ready.is_none())
        })
        .await;
    assert_eq!(claim.status.as_ref().and_then(|s| s.summary.clone()), None);
    assert_eq!(claim.status.as_ref().and_then(|s| s.healthy), Some(true));

    env.teardown([operator]).await;
}

#[tokio::test]
async fn deleting_a_claim_deletes_its_handle() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    let apis = Apis::new(&env);
    apis.create_providers(vec![example_provider("configmap")])
        .await;
    let operator = TestOperator::start(env.kube_config(), &ns);

    apis.create_claim(&resources_claim(
        "doomed",
        Some("configmap"),
        config_template(json!({})),
    ))
    .await;
    let (_, handle) = apis.bound("doomed").await;
    let name = handle.metadata.name.clone().unwrap_or_default();
    apis.claims
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("delete");
    gone(&apis.claims, "doomed", TIMEOUT).await;
    // Gone, or being deleted by its finalizer (its controller does not run here).
    eventually("the handle deleted", TIMEOUT, || async {
        let handle = apis.handles.get_opt(&name).await.expect("read");
        handle
            .is_none_or(|h| h.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await;

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_claim_whose_handle_is_gone_is_deleted() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    let apis = Apis::new(&env);
    apis.create_providers(vec![example_provider("configmap")])
        .await;
    let operator = TestOperator::start(env.kube_config(), &ns);

    apis.create_claim(&resources_claim(
        "orphan",
        Some("configmap"),
        config_template(json!({})),
    ))
    .await;
    let (_, handle) = apis.bound("orphan").await;
    let name = handle.metadata.name.clone().unwrap_or_default();
    apis.handles
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    // Being deleted, the handle is still there: the claim stays bound to it (§16).
    let claim = apis.claims.get("orphan").await.expect("claim");
    assert_eq!(handle_name(&claim), Some(name.as_str()));
    // The handle controller would finish the deletion; here the test does.
    let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let _ = apis
        .handles
        .patch(&name, &PatchParams::default(), &strip)
        .await;
    gone(&apis.claims, "orphan", TIMEOUT).await;
    let handles = apis
        .handles
        .list(&ListParams::default())
        .await
        .expect("handles");
    assert!(
        handles.items.is_empty(),
        "no new handle is made for a deleted claim"
    );

    env.teardown([operator]).await;
}

/// Δ B01 across processes: two operators without leader election, 50 claims against 20
/// matching unbound handles. Every claim is bound, no handle to two claims, no handle
/// created twice for a claim. A handle bound by a process that then lost the claim to the
/// other is released and deleted: no pre-created handle is left unbound.
#[tokio::test]
async fn fifty_claims_two_operators_twenty_handles_no_handle_bound_twice() {
    const CLAIMS: usize = 50;
    const HANDLES: usize = 20;
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    let apis = Apis::new(&env);
    apis.create_providers(vec![plain_provider("plain", false)])
        .await;
    let template = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}});
    let precreated: HashSet<String> = (0..HANDLES).map(|i| format!("guid-pre-{i:02}")).collect();
    for name in &precreated {
        apis.create_handle(&unbound_handle(name, &ns, "plain", template.clone(), None))
            .await;
    }
    let first = TestOperator::start_with(env.kube_config(), &ns, None, "first");
    let second = TestOperator::start_with(env.kube_config(), &ns, None, "second");

    let creates = (0..CLAIMS).map(|i| {
        let claim = resources_claim(&format!("claim-{i:02}"), Some("plain"), template.clone());
        let apis = &apis;
        async move { apis.create_claim(&claim).await }
    });
    futures::future::join_all(creates).await;

    let (claims, handles) = eventually(
        "every claim bound, no unbound handle left",
        Duration::from_secs(120),
        || async {
            let claims = apis.claims.list(&ListParams::default()).await.ok()?.items;
            let handles = apis.handles.list(&ListParams::default()).await.ok()?.items;
            let settled = claims.iter().all(|c| handle_name(c).is_some())
                && handles.iter().all(|h| h.spec.resource_claim.is_some());
            settled.then_some((claims, handles))
        },
    )
    .await;
    assert_eq!(claims.len(), CLAIMS);
    let live: Vec<&ResourceHandle> = handles
        .iter()
        .filter(|h| h.metadata.deletion_timestamp.is_none())
        .collect();

    let named: HashSet<&str> = claims.iter().filter_map(handle_name).collect();
    assert_eq!(named.len(), CLAIMS, "each claim names its own handle");
    for claim in &claims {
        let claim_name = claim.metadata.name.as_deref().unwrap_or_default();
        let handle = live
            .iter()
            .find(|h| h.metadata.name.as_deref() == handle_name(claim))
            .unwrap_or_else(|| panic!("the handle of {claim_name} exists"));
        let bound_to = handle.spec.resource_claim.as_ref().map(|r| r.name.as_str());
        assert_eq!(
            bound_to,
            Some(claim_name),
            "the handle points back to its claim"
        );
    }
    let mut bound_claims: Vec<&str> = live
        .iter()
        .filter_map(|h| h.spec.resource_claim.as_ref().map(|r| r.name.as_str()))
        .collect();
    bound_claims.sort_unstable();
    let distinct: HashSet<&str> = bound_claims.iter().copied().collect();
    assert_eq!(
        bound_claims.len(),
        distinct.len(),
        "no claim has two handles: {bound_claims:?}"
    );
    assert_eq!(live.len(), CLAIMS, "one live handle per claim, no twins");
    let reused = claims
        .iter()
        .filter(|c| handle_name(c).is_some_and(|h| precreated.contains(h)))
        .count();
    let left: Vec<&str> = handles
        .iter()
        .filter_map(|h| h.metadata.name.as_deref())
        .filter(|name| precreated.contains(*name))
        .collect();
    assert_eq!(
        reused,
        left.len(),
        "every pre-created handle left is bound: {left:?}"
    );
    assert!(
        reused >= HANDLES / 2,
        "most pre-created handles were bound, not lost to races: {reused} of {HANDLES}"
    );

    env.teardown([first, second]).await;
}

/// A claim has a `Ready` condition that `kubectl wait` waits for, and `kubectl get`
/// shows why a claim is not ready yet.
#[tokio::test]
async fn kubectl_waits_for_a_claim_to_be_ready() {
    use support::config::{create_config_claim, create_config_provider};
    use support::tools::{run, run_ok};

    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    create_config_provider(&env, true).await;
    let operator = TestOperator::start(env.kube_config(), &ns);
    create_config_claim(&env, "waited", json!({}), json!({}), json!({})).await;
    let (_, handle) = Apis::new(&env).bound("waited").await;
    let claim = format!("resourceclaim.{D}/waited");
    // kubectl runs on a blocking thread: the broker runs on this test's runtime.
    let wait = |timeout: &'static str| {
        let (ns, claim) = (ns.clone(), claim.clone());
        tokio::task::spawn_blocking(move || {
            let args = [
                "wait",
                "-n",
                &ns,
                "--for=condition=Ready",
                &claim,
                "--timeout",
                timeout,
            ];
            run("kubectl", &args, None, Duration::from_secs(90))
        })
    };
    let early = wait("2s").await.expect("kubectl wait");
    assert!(!early.success, "not ready before its ConfigMap is");
    let shown = eventually("the reason in kubectl get", TIMEOUT, || async {
        let table = run_ok(
            "kubectl",
            &["get", "-n", &ns, &claim, "--no-headers", "-o", "wide"],
            None,
            Duration::from_secs(30),
        );
        table.contains("ResourcesNotReady").then_some(table)
    })
    .await;
    assert!(shown.contains("is not ready"), "{shown}");

    let configmap = env
        .configmap_of(&handle.metadata.name.unwrap_or_default(), TIMEOUT)
        .await;
    env.label_configmap(&configmap, "ready", "yes").await;
    let waited = wait("60s").await.expect("kubectl wait");
    assert!(waited.success, "{waited:?}");

    env.teardown([operator]).await;
}

//! The ResourceHandle controller and the managed-resource watches on the real control plane
//! (§12, §13, §14; Δ§3.2): creating, updating and deleting a handle's resources, lifespan end,
//! linked resources and summaries, and the handle fixes of Δ§8 (an expired or orphaned handle
//! deletes itself and stops, B10; deletion tolerates a resource already gone, B11; an existing
//! resource is taken over, B13; finalizers without shards, B14/B15). Handles are created
//! directly; ConfigMaps are the managed kind.

mod support;

use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use poolboy::api::{ResourceClaim, ResourceHandle};
use serde_json::{Value, json};

use support::apis::{Apis, bound};
use support::config::{
    config_resources, create_config_claim, create_config_provider, ready_handle,
};
use support::fixtures::{
    await_object, configmap, create_handle, create_named_handle, guid_name, handle_status,
    record_configmaps, rfc3339,
};
use support::objects::{self, D, configmap_provider, key, merged, resource_name};
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, create, eventually, from_json, gone};

/// A handle (`generateName: guid-`) with one entry per `(name, provider, template)`, and
/// `extra` merged into its spec.
async fn create_handle_of(
    env: &TestEnv,
    resources: &[(&str, &str, Value)],
    extra: Value,
) -> ResourceHandle {
    let resources = objects::resources(&env.namespace, resources);
    create_handle(
        env,
        json!({}),
        merged(json!({"resources": resources}), extra),
    )
    .await
}

/// The provider `config` of ConfigMaps with nothing in its spec but `fields`.
async fn create_plain_provider(env: &TestEnv, fields: Value) {
    Apis::new(env)
        .create_providers(vec![configmap_provider(&env.namespace, "config", fields)])
        .await;
}

#[tokio::test]
async fn a_handle_creates_its_configmap_and_follows_its_readiness() {
    let env = TestEnv::new().await;
    create_plain_provider(
        &env,
        json!({
            "healthCheck": "metadata.labels.broken | default('no') != 'yes'",
            "readinessCheck": "metadata.labels.ready | default('no') == 'yes'",
        }),
    )
    .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let handle = create_handle_of(
        &env,
        &[("cm", "config", json!({"data": {"a": "b"}}))],
        json!({}),
    )
    .await;
    let name = handle.name_any();
    let cm_name = resource_name(&handle.name_any(), 0);

    let cm = eventually("the ConfigMap", TIMEOUT, || configmap(&env, &cm_name)).await;
    let annotations = cm.annotations();
    assert_eq!(annotations[&format!("{D}/resource-handle-name")], name);
    assert_eq!(
        annotations[&format!("{D}/resource-handle-namespace")],
        env.namespace
    );
    assert_eq!(
        annotations[&format!("{D}/resource-provider-name")],
        "config"
    );
    assert_eq!(annotations[&format!("{D}/resource-index")], "0");
    assert_eq!(
        annotations[&format!("{D}/resource-handle-uid")],
        handle.uid().expect("uid")
    );
    assert_eq!(cm.data.expect("data")["a"], "b");

    let status = eventually(
        "a status with reference, healthy, not ready",
        TIMEOUT,
        || async {
            let status = handle_status(&env, &name).await?;
            (status["resources"][0]["healthy"] == true && status["ready"] == false)
                .then_some(status)
        },
    )
    .await;
    assert_eq!(
        status["resources"][0]["reference"],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": cm_name, "namespace": env.namespace})
    );
    assert_eq!(status["resources"][0]["name"], "cm");
    assert_eq!(status["healthy"], true);
    let ready = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .expect("a Ready condition");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["message"], "cm: not ready");
    let live = env
        .api::<ResourceHandle>()
        .get(&name)
        .await
        .expect("handle");
    assert_eq!(live.finalizers(), [D.to_owned()]);

    // A change of the live object reaches the handle status, event-driven.
    let changed = Instant::now();
    env.label_configmap(&cm_name, "ready", "yes").await;
    eventually("the handle becomes ready", TIMEOUT, || async {
        let status = handle_status(&env, &name).await?;
        (status["ready"] == true && status["resources"][0]["ready"] == true).then_some(())
    })
    .await;
    let ready_latency = changed.elapsed();
    let changed = Instant::now();
    env.label_configmap(&cm_name, "broken", "yes").await;
    eventually("the handle becomes unhealthy", TIMEOUT, || async {
        let status = handle_status(&env, &name).await?;
        (status["healthy"] == false && status["ready"] == false).then_some(())
    })
    .await;
    let unhealthy_latency = changed.elapsed();
    println!(
        "latency ConfigMap change -> handle status: ready {ready_latency:?}, unhealthy {unhealthy_latency:?}"
    );
    assert!(ready_latency < Duration::from_secs(2), "{ready_latency:?}");

    env.teardown([operator]).await;
}

#[tokio::test]
async fn an_update_filter_lets_one_field_through_and_blocks_another() {
    let env = TestEnv::new().await;
    Apis::new(&env)
        .create_providers(vec![configmap_provider(
            &env.namespace,
            "filtered",
            json!({"updateFilters": [{"pathMatch": "/data/allowed"}]}),
        )])
        .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let template = json!({"data": {"allowed": "one", "blocked": "one"}});
    let handle = create_handle_of(&env, &[("cm", "filtered", template)], json!({})).await;
    let cm_name = resource_name(&handle.name_any(), 0);
    eventually("the ConfigMap", TIMEOUT, || configmap(&env, &cm_name)).await;

    let patch = json!([{
        "op": "replace",
        "path": "/spec/resources/0/template/data",
        "value": {"allowed": "two", "blocked": "two"},
    }]);
    env.api::<ResourceHandle>()
        .patch(
            &handle.name_any(),
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(patch).expect("patch")),
        )
        .await
        .expect("edit the handle template");
    // The one patch that brings `allowed` through is the one that would have carried `blocked`.
    let data = eventually("the allowed field updated", TIMEOUT, || async {
        let data = configmap(&env, &cm_name).await?.data?;
        (data["allowed"] == "two").then_some(data)
    })
    .await;
    assert_eq!(data["blocked"], "one");

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_handle_is_deleted_at_its_lifespan_end_with_its_resources_annotated_first() {
    let env = TestEnv::new().await;
    create_plain_provider(&env, json!({})).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    // Whole seconds, as the field holds them.
    let end = chrono::DateTime::from_timestamp(chrono::Utc::now().timestamp() + 5, 0)
        .expect("a valid time");
    // A finalizer of the test's own holds the ConfigMap, so its last state can be seen.
    let template = json!({"metadata": {"finalizers": ["tests.poolboy.dev/hold"]}});
    let handle = create_handle_of(
        &env,
        &[("cm", "config", template)],
        json!({"lifespan": {"end": end.format("%Y-%m-%dT%H:%M:%SZ").to_string()}}),
    )
    .await;
    let name = handle.name_any();
    let cm_name = resource_name(&handle.name_any(), 0);
    eventually("the ConfigMap", TIMEOUT, || configmap(&env, &cm_name)).await;

    let handles: Api<ResourceHandle> = env.api();
    gone(&handles, &name, TIMEOUT).await;
    let gone_at = chrono::Utc::now();
    println!(
        "handle deleted {} ms after its lifespan end",
        (gone_at - end).num_milliseconds()
    );
    assert!(gone_at >= end, "deleted before its end");
    assert!(
        gone_at - end < chrono::TimeDelta::seconds(3),
        "deleted late: {gone_at}"
    );

    let cm = configmap(&env, &cm_name)
        .await
        .expect("held by its finalizer");
    assert!(
        cm.metadata.deletion_timestamp.is_some(),
        "the ConfigMap is being deleted"
    );
    let deleted = &cm.annotations()[&format!("{D}/resource-handle-deleted")];
    assert!(
        chrono::DateTime::parse_from_rfc3339(deleted).is_ok() && deleted.ends_with('Z'),
        "{deleted}"
    );
    let release = json!({"metadata": {"finalizers": null}});
    env.api::<ConfigMap>()
        .patch(&cm_name, &PatchParams::default(), &Patch::Merge(&release))
        .await
        .expect("release the ConfigMap");
    gone(&env.api::<ConfigMap>(), &cm_name, TIMEOUT).await;

    env.teardown([operator]).await;
}

/// A bare claim pointing at nothing; labelled ignore so that no claim controller acts on it.
async fn create_ignored_claim(env: &TestEnv, name: &str, detached: bool) -> ResourceClaim {
    let mut claim = objects::claim(name, json!({"resources": []}));
    claim.metadata.labels = Some([(key("ignore"), "true".to_owned())].into());
    let claims: Api<ResourceClaim> = env.api();
    let claim = create(&claims, &claim).await;
    if detached {
        let handle = objects::reference("ResourceHandle", "guid-gone1", &env.namespace);
        let status =
            json!({"status": {"resourceHandle": merged(handle, json!({"detached": true}))}});
        claims
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("detach claim");
    }
    claim
}

fn claim_ref(env: &TestEnv, name: &str) -> Value {
    json!({"resourceClaim": objects::reference("ResourceClaim", name, &env.namespace)})
}

#[tokio::test]
async fn deleting_a_handle_deletes_its_resources_and_its_claim_unless_detached() {
    let env = TestEnv::new().await;
    create_plain_provider(&env, json!({})).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_ignored_claim(&env, "bound", false).await;
    create_ignored_claim(&env, "detached", true).await;
    let bound = create_handle_of(
        &env,
        &[("cm", "config", json!({}))],
        claim_ref(&env, "bound"),
    )
    .await;
    let detached = create_handle_of(
        &env,
        &[("cm", "config", json!({}))],
        claim_ref(&env, "detached"),
    )
    .await;
    let handles: Api<ResourceHandle> = env.api();
    let claims: Api<ResourceClaim> = env.api();

    for handle in [&bound, &detached] {
        let cm_name = resource_name(&handle.name_any(), 0);
        let cm = eventually("the ConfigMap", TIMEOUT, || configmap(&env, &cm_name)).await;
        assert_eq!(
            cm.annotations()[&format!("{D}/resource-claim-name")],
            handle.spec.resource_claim.as_ref().expect("bound").name
        );
        handles
            .delete(&handle.name_any(), &DeleteParams::default())
            .await
            .expect("delete handle");
        gone(&env.api::<ConfigMap>(), &cm_name, TIMEOUT).await;
        gone(&handles, &handle.name_any(), TIMEOUT).await;
    }
    assert!(
        claims.get_opt("bound").await.expect("get").is_none(),
        "bound claim deleted"
    );
    assert!(
        claims.get_opt("detached").await.expect("get").is_some(),
        "detached claim kept"
    );

    env.teardown([operator]).await;
}

/// B11 at its narrowest: a handle deleted the moment its resource exists, before its pass has
/// written the resource's reference to its status, still deletes the resource. The test
/// deletes each handle as the ConfigMap's first watch event arrives.
#[tokio::test]
async fn a_handle_deleted_as_its_resource_appears_deletes_it() {
    const HANDLES: usize = 8;
    let env = TestEnv::new().await;
    create_plain_provider(&env, json!({})).await;
    let handles: Api<ResourceHandle> = env.api();
    let configmaps: Api<ConfigMap> = env.api();
    let deleter = {
        let handles = handles.clone();
        let mut appeared = watcher(configmaps.clone(), watcher::Config::default())
            .touched_objects()
            .boxed();
        tokio::spawn(async move {
            let mut deleted = Vec::new();
            while deleted.len() < HANDLES
                && let Some(Ok(configmap)) = appeared.next().await
            {
                let Some(handle) = configmap
                    .annotations()
                    .get(&format!("{D}/resource-handle-name"))
                    .cloned()
                else {
                    continue;
                };
                if !deleted.contains(&handle) {
                    handles
                        .delete(&handle, &DeleteParams::default())
                        .await
                        .expect("delete handle");
                    deleted.push(handle);
                }
            }
        })
    };
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let mut names = Vec::new();
    for _ in 0..HANDLES {
        let handle = create_handle_of(&env, &[("cm", "config", json!({}))], json!({})).await;
        names.push(handle.name_any());
    }
    tokio::time::timeout(TIMEOUT, deleter)
        .await
        .expect("every handle's ConfigMap appeared")
        .expect("the deleter ran");
    for name in &names {
        gone(&handles, name, TIMEOUT).await;
        gone(&configmaps, &resource_name(name, 0), TIMEOUT).await;
    }

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_handle_whose_claim_is_gone_deletes_itself() {
    let env = TestEnv::new().await;
    create_plain_provider(&env, json!({})).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let handle = create_handle_of(
        &env,
        &[("cm", "config", json!({}))],
        claim_ref(&env, "never-was"),
    )
    .await;
    let handles: Api<ResourceHandle> = env.api();
    gone(&handles, &handle.name_any(), TIMEOUT).await;
    let cm_name = resource_name(&handle.name_any(), 0);
    assert!(
        configmap(&env, &cm_name).await.is_none(),
        "nothing was created"
    );

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_bad_template_is_reported_and_does_not_disturb_other_handles() {
    let env = TestEnv::new().await;
    Apis::new(&env)
        .create_providers(vec![
            configmap_provider(&env.namespace, "good", json!({})),
            objects::provider(
                "bad",
                json!({
                    "template": {"enable": true},
                    "override": {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"namespace": env.namespace},
                        "data": {"x": "{{ no_such_variable }}"},
                    },
                }),
            ),
        ])
        .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let bad = create_handle_of(
        &env,
        &[("broken", "bad", json!({})), ("fine", "good", json!({}))],
        json!({}),
    )
    .await;
    let other = create_handle_of(&env, &[("cm", "good", json!({}))], json!({})).await;

    let bad_name = bad.name_any();
    let status = eventually(
        "the problem in the bad handle's status",
        TIMEOUT,
        || async {
            let status = handle_status(&env, &bad_name).await?;
            (status["resources"][0]["waitingFor"] == "Resource Definition").then_some(status)
        },
    )
    .await;
    let valid = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Valid"))
        .expect("a Valid condition")
        .clone();
    assert_eq!(valid["status"], "False");
    let message = valid["message"].as_str().expect("message");
    assert!(
        message.starts_with("spec.resources[0] (broken): ResourceProvider bad: override failed"),
        "{message}"
    );
    // The other resource of the same handle and the other handle are served.
    let fine_name = resource_name(&bad.name_any(), 1);
    let other_name = resource_name(&other.name_any(), 0);
    eventually("the bad handle's good resource", TIMEOUT, || {
        configmap(&env, &fine_name)
    })
    .await;
    eventually("the other handle's ConfigMap", TIMEOUT, || {
        configmap(&env, &other_name)
    })
    .await;
    env.event(&bad_name, "Warning", "InvalidResource", TIMEOUT)
        .await;

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_linked_resource_waits_for_its_link_then_uses_its_template_vars() {
    let env = TestEnv::new().await;
    Apis::new(&env).create_providers(
        vec![
            configmap_provider(&env.namespace, "base", json!({})),
            objects::provider(
                "app",
                json!({
                    "linkedResourceProviders": [{
                        "name": "base",
                        "waitFor": "linked_resource_state.metadata.labels.go | default('') == 'yes'",
                        "templateVars": [{"name": "base_name", "from": "/metadata/name"}],
                    }],
                    "template": {"enable": true},
                    "override": {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"namespace": env.namespace},
                        "data": {"base": "{{ base_name }}"},
                    },
                }),
            ),
        ],
    )
    .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let handle = create_handle_of(
        &env,
        &[("base", "base", json!({})), ("app", "app", json!({}))],
        json!({}),
    )
    .await;
    let name = handle.name_any();
    let base_name = resource_name(&handle.name_any(), 0);
    let app_name = resource_name(&handle.name_any(), 1);
    eventually("the base ConfigMap", TIMEOUT, || {
        configmap(&env, &base_name)
    })
    .await;
    eventually("the app waits for its link", TIMEOUT, || async {
        let status = handle_status(&env, &name).await?;
        (status["resources"][1]["waitingFor"] == "Linked ResourceProvider").then_some(())
    })
    .await;
    assert!(configmap(&env, &app_name).await.is_none());

    env.label_configmap(&base_name, "go", "yes").await;
    let app = eventually("the app ConfigMap", TIMEOUT, || configmap(&env, &app_name)).await;
    assert_eq!(app.data.expect("data")["base"], base_name);
    eventually("waitingFor cleared", TIMEOUT, || async {
        let status = handle_status(&env, &name).await?;
        let entry = &status["resources"][1];
        (entry.get("waitingFor").is_none() && entry["reference"]["name"] == app_name.as_str())
            .then_some(())
    })
    .await;

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_deleted_managed_resource_is_seen_and_recreated() {
    let env = TestEnv::new().await;
    create_plain_provider(&env, json!({"readinessCheck": "metadata.uid is defined"})).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let handle = create_handle_of(&env, &[("cm", "config", json!({}))], json!({})).await;
    let name = handle.name_any();
    let cm_name = resource_name(&handle.name_any(), 0);
    let first = eventually("the ConfigMap", TIMEOUT, || configmap(&env, &cm_name)).await;
    eventually("the handle is ready", TIMEOUT, || async {
        (handle_status(&env, &name).await?["ready"] == true).then_some(())
    })
    .await;
    // The first create is told by the status reference, not by an Event.
    assert!(env.events_about(&name).await.is_empty());

    for round in 0..2 {
        let before = configmap(&env, &cm_name).await.expect("exists");
        env.api::<ConfigMap>()
            .delete(&cm_name, &DeleteParams::default())
            .await
            .expect("delete the ConfigMap");
        let deleted = Instant::now();
        let again = eventually("the ConfigMap is recreated", TIMEOUT, || async {
            let cm = configmap(&env, &cm_name).await?;
            (cm.uid() != before.uid()).then_some(cm)
        })
        .await;
        println!(
            "round {round}: ConfigMap recreated {:?} after its deletion",
            deleted.elapsed()
        );
        assert_ne!(again.uid(), first.uid());
    }
    let recreated = env.event(&name, "Normal", "ResourceCreated", TIMEOUT).await;
    assert_eq!(
        recreated.note.as_deref(),
        Some(
            format!(
                "created ConfigMap {}/{cm_name} again: it was gone",
                env.namespace
            )
            .as_str()
        )
    );
    eventually("the handle is ready again", TIMEOUT, || async {
        (handle_status(&env, &name).await?["ready"] == true).then_some(())
    })
    .await;

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_provider_handle_generates_its_resources_and_a_summary() {
    let env = TestEnv::new().await;
    Apis::new(&env)
        .create_providers(vec![configmap_provider(
            &env.namespace,
            "sized",
            json!({
                "parameters": [{"name": "size", "default": {"value": "small"}}],
                "template": {"enable": true, "definition": {"data": {"size": "{{ size }}"}}},
                "updateFilters": [{"pathMatch": "/data/.*"}],
                "statusSummaryTemplate": {
                    "size": "{{ size }}",
                    "configMap": "{{ resources[0].state.metadata.name | default('none') }}",
                },
            }),
        )])
        .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let handle = create_handle_of(
        &env,
        &[],
        json!({"provider": {"name": "sized", "parameterValues": {"size": "large"}}}),
    )
    .await;
    let name = handle.name_any();
    let cm_name = resource_name(&handle.name_any(), 0);
    let cm = eventually("the generated ConfigMap", TIMEOUT, || {
        configmap(&env, &cm_name)
    })
    .await;
    assert_eq!(cm.data.expect("data")["size"], "large");
    eventually("the summary", TIMEOUT, || async {
        let status = handle_status(&env, &name).await?;
        (status["summary"] == json!({"size": "large", "configMap": cm_name})).then_some(())
    })
    .await;

    let patch = json!({"spec": {"provider": {"parameterValues": {"size": "huge"}}}});
    env.api::<ResourceHandle>()
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("change a parameter");
    eventually("the ConfigMap follows the parameter", TIMEOUT, || async {
        let data = configmap(&env, &cm_name).await?.data?;
        (data["size"] == "huge").then_some(())
    })
    .await;
    eventually("the summary follows the parameter", TIMEOUT, || async {
        let status = handle_status(&env, &name).await?;
        (status["summary"]["size"] == "huge").then_some(())
    })
    .await;
    let handle = env
        .api::<ResourceHandle>()
        .get(&name)
        .await
        .expect("handle");
    let resources = handle.spec.resources.expect("generated spec.resources");
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].name.as_deref(), Some("sized"));

    env.teardown([operator]).await;
}

/// Δ B10: a handle past its lifespan end, or whose claim is gone, deletes itself and does
/// nothing else in that pass: its resources are never created.
#[tokio::test]
async fn b10_an_expired_or_orphaned_handle_deletes_itself_without_creating_anything() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let seen = record_configmaps(&env).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let resources = config_resources(&env, &[("config", json!({}))]);
    let expired = guid_name("expired");
    let end = rfc3339(Utc::now() - TimeDelta::seconds(30));
    create_named_handle(
        &env,
        &expired,
        json!({}),
        json!({"lifespan": {"end": end}, "resources": resources}),
    )
    .await;
    let orphan = guid_name("orphan");
    let spec = json!({"resourceClaim": objects::reference("ResourceClaim", "never-existed", &env.namespace), "resources": resources});
    create_named_handle(&env, &orphan, json!({}), spec).await;
    let handles_api: Api<ResourceHandle> = env.api();
    gone(&handles_api, &expired, TIMEOUT).await;
    gone(&handles_api, &orphan, TIMEOUT).await;

    // A ConfigMap of the test's own, once seen, proves the watch has caught up.
    let barrier: ConfigMap = from_json(json!({"metadata": {"name": "barrier"}}));
    env.create(&barrier).await;
    eventually("the watch sees the barrier", TIMEOUT, || async {
        seen.lock().ok()?.contains("barrier").then_some(())
    })
    .await;
    let seen = seen.lock().expect("the record").clone();
    for handle in [&expired, &orphan] {
        assert!(
            !seen.contains(&resource_name(handle, 0)),
            "{handle} created a resource: {seen:?}"
        );
    }

    env.teardown([operator]).await;
}

/// A handle named after `prefix` with two ConfigMaps, ready, and no operator running: what it
/// finds when one starts again is up to the test.
async fn ready_handle_of_two_while_stopped(env: &TestEnv, prefix: &str) -> String {
    create_config_provider(env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let name = guid_name(prefix);
    let resources = config_resources(env, &[("a", json!({})), ("b", json!({}))]);
    create_named_handle(env, &name, json!({}), json!({"resources": resources})).await;
    ready_handle(env, &name).await;
    operator.stop().await;
    name
}

/// Δ B11: deletion works from `status.resources[].reference` and ignores a resource that is
/// already gone (404): the other resource is still deleted and the handle released.
#[tokio::test]
async fn b11_deleting_a_handle_whose_resource_is_already_gone_completes() {
    let env = TestEnv::new().await;
    let name = ready_handle_of_two_while_stopped(&env, "partial").await;

    let configmaps: Api<ConfigMap> = env.api();
    configmaps
        .delete(&resource_name(&name, 0), &DeleteParams::default())
        .await
        .expect("deleting one resource behind the handle's back");
    let handles_api: Api<ResourceHandle> = env.api();
    handles_api
        .delete(&name, &DeleteParams::default())
        .await
        .expect("deleting the handle");
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    gone(&handles_api, &name, TIMEOUT).await;
    gone(&configmaps, &resource_name(&name, 1), TIMEOUT).await;
    assert!(
        configmap(&env, &resource_name(&name, 0)).await.is_none(),
        "not recreated"
    );

    env.teardown([operator]).await;
}

/// B11's mark is for whoever sees a resource while it is being deleted. A ConfigMap with no
/// finalizer goes at once, so none can: it is deleted with one request, never marked.
#[tokio::test]
async fn a_resource_that_goes_at_once_is_deleted_without_the_mark() {
    let env = TestEnv::new().await;
    create_plain_provider(&env, json!({})).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let handle = create_handle_of(&env, &[("cm", "config", json!({}))], json!({})).await;
    let cm_name = resource_name(&handle.name_any(), 0);
    let configmaps: Api<ConfigMap> = env.api();
    eventually("the ConfigMap", TIMEOUT, || configmap(&env, &cm_name)).await;

    let config = watcher::Config::default().fields(&format!("metadata.name={cm_name}"));
    // A watch error (the API server busy) is retried; the handle is deleted only once the
    // watch shows the ConfigMap, so that every version after that one is seen.
    let mut events = watcher(configmaps.clone(), config)
        .default_backoff()
        .boxed();
    let (listed, watching) = tokio::sync::oneshot::channel();
    let seen = tokio::spawn(async move {
        let mut seen = Vec::new();
        let mut listed = Some(listed);
        while let Some(event) = events.next().await {
            let Ok(event) = event else { continue };
            if let watcher::Event::InitDone = event
                && let Some(listed) = listed.take()
            {
                let _ = listed.send(());
            }
            let (deleted, object) = match event {
                watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                    (false, object)
                }
                watcher::Event::Delete(object) => (true, object),
                watcher::Event::Init | watcher::Event::InitDone => continue,
            };
            seen.push(
                object
                    .annotations()
                    .contains_key(&key("resource-handle-deleted")),
            );
            if deleted {
                return seen;
            }
        }
        seen
    });
    tokio::time::timeout(TIMEOUT, watching)
        .await
        .expect("the watch lists the ConfigMap")
        .expect("the watch task");
    let handles: Api<ResourceHandle> = env.api();
    handles
        .delete(&handle.name_any(), &DeleteParams::default())
        .await
        .expect("deleting the handle");
    gone(&handles, &handle.name_any(), TIMEOUT).await;
    let marks = tokio::time::timeout(TIMEOUT, seen)
        .await
        .expect("the ConfigMap's deletion is seen")
        .expect("the watch task");
    assert!(!marks.is_empty(), "the ConfigMap's versions are seen");
    assert!(
        marks.iter().all(|marked| !marked),
        "a version carried the mark: {marks:?}"
    );

    env.teardown([operator]).await;
}

/// A handle's finalizer deletes only resources of this very handle. Otherwise a process
/// finalizing from a stale copy, after a namesake (the same claim-derived name) has made the
/// resource again, would take the namesake's resource, and its deletion, marked as Poolboy's,
/// would go unseen: the namesake would stay without its ConfigMap for good.
#[tokio::test]
async fn a_deleted_handle_leaves_the_resource_of_a_namesake_alone() {
    let env = TestEnv::new().await;
    let name = ready_handle_of_two_while_stopped(&env, "namesake").await;

    // The first ConfigMap now belongs to another handle of the same name.
    let configmaps: Api<ConfigMap> = env.api();
    let namesakes = resource_name(&name, 0);
    configmaps
        .patch(
            &namesakes,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                key("resource-handle-uid"): "00000000-0000-0000-0000-00000000beef"}}})),
        )
        .await
        .expect("handing the ConfigMap to a namesake");
    let handles_api: Api<ResourceHandle> = env.api();
    handles_api
        .delete(&name, &DeleteParams::default())
        .await
        .expect("deleting the handle");
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    gone(&handles_api, &name, TIMEOUT).await;
    gone(&configmaps, &resource_name(&name, 1), TIMEOUT).await;
    let kept = configmap(&env, &namesakes)
        .await
        .expect("the namesake's ConfigMap is kept");
    assert!(
        !kept
            .annotations()
            .contains_key(&key("resource-handle-deleted")),
        "and not marked as being deleted"
    );

    env.teardown([operator]).await;
}

/// Δ B13: a resource that already exists under the name the handle generates is taken over
/// (patched through the update filters), not an error: the handle is valid and ready, and the
/// ConfigMap keeps its uid. It is also what a process leaves that died after creating a
/// resource and before recording its reference in the handle's status.
#[tokio::test]
async fn b13_an_existing_resource_is_taken_over_not_an_error() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let name = guid_name("existing");
    let cm: ConfigMap = from_json(json!({
        "metadata": {"name": resource_name(&name, 0)},
        "data": {"v": "before"},
    }));
    let before = env.create(&cm).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_named_handle(
        &env,
        &name,
        json!({}),
        json!({"resources": config_resources(&env, &[("config", json!({"v": "after"}))])}),
    )
    .await;
    let status = ready_handle(&env, &name).await;
    let valid = status["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Valid" && c["status"] == "True")
    });
    assert!(valid, "{status}");
    let cm = eventually("the ConfigMap takes the template", TIMEOUT, || async {
        let cm = configmap(&env, &resource_name(&name, 0)).await?;
        (cm.data.as_ref()?.get("v")? == "after").then_some(cm)
    })
    .await;
    assert_eq!(cm.uid(), before.uid(), "patched, not recreated");

    env.teardown([operator]).await;
}

/// Δ B14/B15 (#145): no shards here. The finalizer is the bare domain on claims and handles
/// (no shard index in it, no shard label anywhere), and objects carrying finalizers of other
/// Poolboy modes or versions (`D/handler`, `D/handler-<n>`, `D/resource-handler-<n>`) keep
/// them alone and are released on deletion all the same.
#[tokio::test]
async fn b15_finalizers_carry_no_shard_and_legacy_ones_are_released() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_config_claim(&env, "plain", json!({}), json!({}), json!({})).await;
    let handle = bound(&env, "plain").await;
    let claims: Api<ResourceClaim> = env.api();
    let handles_api: Api<ResourceHandle> = env.api();
    let claim = claims.get("plain").await.expect("claim");
    assert_eq!(claim.finalizers(), [D.to_owned()]);
    let bound_handle = handles_api.get(&handle).await.expect("handle");
    assert_eq!(bound_handle.finalizers(), [D.to_owned()]);
    for (kind, labels) in [("claim", claim.labels()), ("handle", bound_handle.labels())] {
        assert!(
            !labels.keys().any(|k| k.contains("shard")),
            "{kind} labels {labels:?}"
        );
    }

    // Legacy finalizers: the operator adds none beside them (Δ§4.7: one Poolboy finalizer),
    // and on deletion removes them all.
    let legacy = guid_name("legacy");
    let finalizers = json!([key("handler-2"), key("resource-handler-0")]);
    let metadata = json!({"finalizers": finalizers});
    let resources = config_resources(&env, &[("config", json!({}))]);
    create_named_handle(&env, &legacy, metadata, json!({"resources": resources})).await;
    let managed = await_object(&handles_api, &legacy, "managed", |h| {
        h["status"]["conditions"].is_array()
    })
    .await;
    assert_eq!(managed["metadata"]["finalizers"], finalizers);
    handles_api
        .delete(&legacy, &DeleteParams::default())
        .await
        .expect("delete");
    gone(&handles_api, &legacy, TIMEOUT).await;

    let metadata = json!({"finalizers": [key("handler")]});
    create_config_claim(&env, "legacy", metadata, json!({}), json!({})).await;
    let legacy_handle = bound(&env, "legacy").await;
    claims
        .delete("legacy", &DeleteParams::default())
        .await
        .expect("delete");
    gone(&claims, "legacy", TIMEOUT).await;
    gone(&handles_api, &legacy_handle, TIMEOUT).await;

    env.teardown([operator]).await;
}

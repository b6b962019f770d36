//! The ignore label and restores from a backup (§7.6, Δ B12, Δ B13): an ignored handle or
//! claim is left alone until the label goes, and handles and claims restored with their
//! status adopt what exists instead of duplicating it. The whole operator runs.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use poolboy::api::{ResourceClaim, ResourceHandle};
use serde_json::json;
use support::apis::bound;
use support::config::{
    config_resources, create_config_claim, create_config_provider, ready_handle,
};
use support::fixtures::{
    await_object, configmap, configmaps_of, create_handle, create_kind_provider,
    create_named_handle, guid_name, handle, handle_status, handles, handles_of_claim, json_of,
    managed_through, set_ignored,
};
use support::objects::{self, D, key, resource_name};
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually, from_json};

#[tokio::test]
async fn an_ignored_handle_is_left_alone_until_the_label_is_removed() {
    let env = TestEnv::new().await;
    create_kind_provider(
        &env,
        "config",
        "v1",
        "ConfigMap",
        json!({
            "updateFilters": [{"pathMatch": "/data/.*"}],
        }),
    )
    .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let spec = |data: &str| json!({"resources": objects::resources(&env.namespace, &[("cm", "config", json!({"data": {"v": data}}))])});
    let ignore = json!({"labels": {format!("{D}/ignore"): ""}});
    let ignored = create_handle(&env, ignore, spec("one")).await;
    let name = ignored.name_any();
    let cm_name = resource_name(&ignored.name_any(), 0);

    // A handle created after it, managed through, is the barrier: the ignored one was seen.
    let barrier = create_handle(&env, json!({}), spec("one")).await;
    managed_through(&env, &barrier.name_any()).await;
    let untouched = handle(&env, &name).await.expect("the ignored handle");
    assert!(untouched.status.is_none(), "no status written");
    assert!(untouched.finalizers().is_empty(), "no finalizer added");
    assert!(configmap(&env, &cm_name).await.is_none(), "nothing created");

    // Management resumes when the label goes.
    set_ignored(&env.api::<ResourceHandle>(), &name, false).await;
    let cm = eventually("the ConfigMap", TIMEOUT, || configmap(&env, &cm_name)).await;
    assert_eq!(cm.data.expect("data")["v"], "one");
    managed_through(&env, &name).await;
    assert_eq!(
        handle(&env, &name).await.expect("handle").finalizers(),
        [D.to_owned()]
    );

    // Ignored again: a template change is not applied, a deleted resource is not recreated.
    set_ignored(&env.api::<ResourceHandle>(), &name, true).await;
    let edit =
        json!([{"op": "replace", "path": "/spec/resources/0/template/data/v", "value": "two"}]);
    env.api::<ResourceHandle>()
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(edit).expect("patch")),
        )
        .await
        .expect("edit the ignored handle");
    env.api::<ConfigMap>()
        .delete(&cm_name, &DeleteParams::default())
        .await
        .expect("delete the ConfigMap");
    let barrier = create_handle(&env, json!({}), spec("one")).await;
    managed_through(&env, &barrier.name_any()).await;
    assert!(
        configmap(&env, &cm_name).await.is_none(),
        "an ignored handle does not recreate its resource"
    );

    set_ignored(&env.api::<ResourceHandle>(), &name, false).await;
    let cm = eventually("the ConfigMap is recreated", TIMEOUT, || {
        configmap(&env, &cm_name)
    })
    .await;
    assert_eq!(cm.data.expect("data")["v"], "two");

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_handle_restored_from_a_backup_adopts_its_resources() {
    let env = TestEnv::new().await;
    create_kind_provider(
        &env,
        "config",
        "v1",
        "ConfigMap",
        json!({
            "updateFilters": [{"pathMatch": "/data/.*"}],
            "readinessCheck": "data.v | default('') == 'restored'",
        }),
    )
    .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);

    // As a backup tool restores them: the handle with the ignore label, its finalizer and its
    // status (written through the status subresource, as it cannot come with the create),
    // and the resource it made, under a name the handle would not generate today.
    let name = format!("guid-{}", support::random_suffix());
    let metadata = json!({
        "name": name,
        "labels": {format!("{D}/ignore"): ""},
        "finalizers": [D],
    });
    let spec = json!({"resources": objects::resources(&env.namespace, &[(
        "cm", "config", json!({"data": {"v": "restored"}}),
    )])});
    let restored = create_handle(&env, metadata, spec).await;
    let reference = json!({
        "apiVersion": "v1", "kind": "ConfigMap", "name": "from-backup", "namespace": env.namespace,
    });
    let status = json!({"status": {"resources": [{"name": "cm", "reference": reference}]}});
    env.api::<ResourceHandle>()
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("restore the status");
    let annotations = json!({
        format!("{D}/resource-handle-name"): name,
        format!("{D}/resource-handle-namespace"): env.namespace,
        format!("{D}/resource-handle-uid"): "00000000-0000-0000-0000-000000000000",
        format!("{D}/resource-index"): "0",
        format!("{D}/resource-provider-name"): "config",
        format!("{D}/resource-provider-namespace"): env.namespace,
    });
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "from-backup", "annotations": annotations},
        "data": {"v": "as backed up"},
    }))
    .expect("valid ConfigMap");
    let before = env
        .api::<ConfigMap>()
        .create(&PostParams::default(), &cm)
        .await
        .expect("restore the ConfigMap");

    set_ignored(&env.api::<ResourceHandle>(), &name, false).await;
    let cm = eventually("the restored ConfigMap is patched", TIMEOUT, || async {
        let cm = configmap(&env, "from-backup").await?;
        (cm.data.as_ref()?.get("v")?.as_str() == "restored").then_some(cm)
    })
    .await;
    assert_eq!(cm.uid(), before.uid(), "patched, not recreated");
    assert_eq!(
        cm.annotations()[&format!("{D}/resource-handle-uid")],
        restored.uid().expect("uid"),
        "the annotations follow the restored handle"
    );
    let status = eventually("the restored handle is ready", TIMEOUT, || async {
        let status = handle_status(&env, &name).await?;
        (status["ready"] == true).then_some(status)
    })
    .await;
    assert_eq!(status["resources"][0]["reference"], reference);
    let owned: Vec<String> = env
        .configmaps_of_handle(&name)
        .await
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(
        owned,
        ["from-backup"],
        "no duplicate under a generated name"
    );
    let guid0 = resource_name(&name, 0);
    assert!(configmap(&env, &guid0).await.is_none());

    env.teardown([operator]).await;
}

/// Acceptance (d), §7.6: while a claim carries `D/ignore`, its edits are not acted on and a
/// new ignored claim is not even given a handle; once the label goes, management resumes.
#[tokio::test]
async fn an_ignored_claim_is_paused_until_the_label_goes() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let claims: Api<ResourceClaim> = env.api();
    create_config_claim(&env, "paused", json!({}), json!({}), json!({"v": "one"})).await;
    let handle = bound(&env, "paused").await;
    let cm = resource_name(&handle, 0);
    eventually("the ConfigMap", TIMEOUT, || async {
        let data = configmap(&env, &cm).await?.data?;
        (data.get("v")? == "one").then_some(())
    })
    .await;

    set_ignored(&claims, "paused", true).await;
    let edit =
        json!([{"op": "replace", "path": "/spec/resources/0/template/data/v", "value": "two"}]);
    claims
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Json::<()>(from_json(edit)),
        )
        .await
        .expect("editing the ignored claim");
    let ignored = json!({"labels": {key("ignore"): ""}});
    create_config_claim(&env, "new-ignored", ignored, json!({}), json!({})).await;
    // A claim created after both, bound and provisioned, is the barrier: they were seen.
    create_config_claim(&env, "barrier", json!({}), json!({}), json!({})).await;
    let barrier = bound(&env, "barrier").await;
    ready_handle(&env, &barrier).await;
    let data = configmap(&env, &cm)
        .await
        .expect("ConfigMap")
        .data
        .expect("data");
    assert_eq!(data["v"], "one", "the ignored claim's edit is not acted on");
    let handle_now = json_of(&env.api::<ResourceHandle>(), &handle)
        .await
        .expect("handle");
    assert_eq!(
        handle_now["spec"]["resources"][0]["template"]["data"]["v"],
        "one"
    );
    let new_ignored = claims.get("new-ignored").await.expect("claim");
    assert!(
        new_ignored.status.is_none(),
        "no status on an ignored claim"
    );
    assert!(
        new_ignored.finalizers().is_empty(),
        "no finalizer on an ignored claim"
    );
    assert!(handles_of_claim(&env, "new-ignored").await.is_empty());

    set_ignored(&claims, "paused", false).await;
    eventually("the edit goes through once unignored", TIMEOUT, || async {
        let data = configmap(&env, &cm).await?.data?;
        (data.get("v")? == "two").then_some(())
    })
    .await;
    set_ignored(&claims, "new-ignored", false).await;
    let created = bound(&env, "new-ignored").await;
    ready_handle(&env, &created).await;
    assert_eq!(handles_of_claim(&env, "paused").await, [handle]);

    env.teardown([operator]).await;
}

/// Acceptance (d), §7.6: claims restored from a backup are adopted, never given a second
/// handle: one restored with the ignore label and its status (pointing at its restored handle)
/// then unlabelled, and one restored without status after its handle (restored ignored).
#[tokio::test]
async fn restored_claims_are_adopted_not_duplicated() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let claims: Api<ResourceClaim> = env.api();
    let handles_api: Api<ResourceHandle> = env.api();
    let bound_spec = |claim: &str| {
        json!({
            "resourceClaim": objects::reference("ResourceClaim", claim, &env.namespace),
            "resources": config_resources(&env, &[("config", json!({"v": claim}))]),
        })
    };
    let bound_labels = |claim: &str, ignored: bool| {
        let mut labels = json!({key("resource-claim-name"): claim,
                                key("resource-claim-namespace"): env.namespace});
        if ignored {
            labels[key("ignore")] = json!("");
        }
        json!({"labels": labels, "finalizers": [D]})
    };

    // With status: the claim first (ignored), then its handle, then the claim's status.
    let ignored = json!({"labels": {key("ignore"): ""}, "finalizers": [D]});
    create_config_claim(
        &env,
        "with-status",
        ignored,
        json!({}),
        json!({"v": "with-status"}),
    )
    .await;
    let first = guid_name("with-status");
    create_named_handle(
        &env,
        &first,
        bound_labels("with-status", false),
        bound_spec("with-status"),
    )
    .await;
    // Recorded with another operator namespace, as upstream Poolboy's own restore test writes
    // it: the handle is looked up by name where handles live (§7 step 5).
    let status = json!({"status": {"resourceHandle": objects::reference("ResourceHandle", &first, "poolboy-dev")}});
    claims
        .patch_status(
            "with-status",
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .expect("restoring the claim status");
    ready_handle(&env, &first).await;
    set_ignored(&claims, "with-status", false).await;
    await_object(&claims, "with-status", "mirrors its restored handle", |c| {
        c["status"]["resourceHandle"]["name"] == first.as_str() && c["status"]["ready"] == true
    })
    .await;

    // Without status: the handle first (ignored, as a restore makes it), then the claim.
    let second = guid_name("without-status");
    create_named_handle(
        &env,
        &second,
        bound_labels("without-status", true),
        bound_spec("without-status"),
    )
    .await;
    create_config_claim(
        &env,
        "without-status",
        json!({}),
        json!({}),
        json!({"v": "without-status"}),
    )
    .await;
    assert_eq!(bound(&env, "without-status").await, second, "adopted");
    set_ignored(&handles_api, &second, false).await;
    ready_handle(&env, &second).await;
    await_object(&claims, "without-status", "ready", |c| {
        c["status"]["ready"] == true
    })
    .await;

    assert_eq!(
        handles_of_claim(&env, "with-status").await,
        std::slice::from_ref(&first)
    );
    assert_eq!(
        handles_of_claim(&env, "without-status").await,
        std::slice::from_ref(&second)
    );
    assert_eq!(handles(&env).await.len(), 2, "no second handle was created");
    for (handle, v) in [(&first, "with-status"), (&second, "without-status")] {
        let cm = configmap(&env, &resource_name(handle, 0))
            .await
            .expect("ConfigMap");
        assert_eq!(cm.data.expect("data")["v"], v);
        assert_eq!(configmaps_of(&env, handle).await.len(), 1);
    }

    env.teardown([operator]).await;
}

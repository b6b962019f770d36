//! Acceptance tests of the local control plane: each one checks a piece of API machinery that
//! only a real kube-apiserver (and kube-controller-manager) provides, and that the broker's
//! controllers rely on. They run against the cluster of `make cluster` / `make test`.

mod support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::core::Status;
use kube::{Api, CustomResource, CustomResourceExt, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::OnceCell;

use support::{TestEnv, eventually};

const GROUP: &str = "tests.poolboy.dev";
const TIMEOUT: Duration = Duration::from_secs(60);

/// A tiny test kind with a structural schema: `spec.size` is a required integer in 1..=10.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "tests.poolboy.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
struct WidgetSpec {
    #[schemars(range(min = 1, max = 10))]
    size: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    color: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    phase: Option<String>,
}

static WIDGET_CRD: OnceCell<()> = OnceCell::const_new();

/// `Api<Widget>` in the test's namespace, with the Widget CRD installed (once per binary).
async fn widgets(env: &TestEnv) -> Api<Widget> {
    WIDGET_CRD
        .get_or_init(|| async { support::apply_crds(&env.client, &[Widget::crd()]).await })
        .await;
    env.api()
}

/// The same objects, untyped: to send what the typed API cannot express.
async fn raw_widgets(env: &TestEnv) -> Api<DynamicObject> {
    widgets(env).await;
    Api::namespaced_with(
        env.client.clone(),
        &env.namespace,
        &ApiResource::erase::<Widget>(&()),
    )
}

fn widget(name: &str, size: i32) -> Widget {
    Widget::new(name, WidgetSpec { size, color: None })
}

/// The API error status of `result`, or a panic naming what was expected.
fn api_error<T: std::fmt::Debug>(result: kube::Result<T>, expected: &str) -> Box<Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected {expected}, got {other:?}"),
    }
}

fn is_condition_true(crd: &CustomResourceDefinition, type_: &str) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

#[tokio::test]
async fn crd_with_structural_schema_becomes_established() {
    let env = TestEnv::new().await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());

    // A CRD of its own (fresh group), so that Established is observed from creation on.
    let group = format!("{}.{GROUP}", support::random_suffix());
    let mut crd = Widget::crd();
    crd.spec.group = group.clone();
    let name = format!("widgets.{group}");
    crd.metadata.name = Some(name.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    eventually("the fresh CRD to be Established", TIMEOUT, || async {
        let crd = crds.get(&name).await.unwrap();
        (is_condition_true(&crd, "Established") && is_condition_true(&crd, "NamesAccepted"))
            .then_some(())
    })
    .await;
    crds.delete(&name, &DeleteParams::default()).await.unwrap();

    // A schema that is not structural (a property without a type) is refused.
    let mut bad = Widget::crd();
    bad.spec.group = format!("bad-{group}");
    bad.metadata.name = Some(format!("widgets.bad-{group}"));
    let schema = bad.spec.versions[0]
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .unwrap();
    schema
        .properties
        .as_mut()
        .unwrap()
        .insert("loose".to_owned(), Default::default());
    let status = api_error(
        crds.create(&PostParams::default(), &bad).await,
        "422 for a non-structural schema",
    );
    assert_eq!(status.code, 422, "{status:?}");
    assert!(status.message.contains("loose"), "{status:?}");

    // The harness installed the project's six CRDs, and they are Established.
    for crd in poolboy::api::crd::all(&poolboy::api::OperatorDomain::default()) {
        let name = crd.metadata.name.unwrap();
        let live = crds.get(&name).await.unwrap();
        assert!(is_condition_true(&live, "Established"), "{name}");
    }
    env.cleanup().await;
}

#[tokio::test]
async fn schema_violations_are_rejected_with_422() {
    let env = TestEnv::new().await;
    let raw = raw_widgets(&env).await;
    let cases = [
        ("below-minimum", json!({"size": 0})),
        ("wrong-type", json!({"size": "big"})),
        ("missing-required", json!({"color": "red"})),
    ];
    for (name, spec) in cases {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{GROUP}/v1"),
            "kind": "Widget",
            "metadata": {"name": name},
            "spec": spec,
        }))
        .unwrap();
        let status = api_error(raw.create(&PostParams::default(), &obj).await, "422");
        assert_eq!(status.code, 422, "{name}: {status:?}");
        assert_eq!(status.reason, "Invalid", "{name}: {status:?}");
    }
    env.cleanup().await;
}

#[tokio::test]
async fn unknown_fields_are_pruned() {
    let env = TestEnv::new().await;
    let raw = raw_widgets(&env).await;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "Widget",
        "metadata": {"name": "pruned"},
        "spec": {"size": 3, "shape": "round"},
        "extra": {"a": 1},
    }))
    .unwrap();
    raw.create(&PostParams::default(), &obj).await.unwrap();

    let stored = raw.get("pruned").await.unwrap();
    assert_eq!(stored.data["spec"], json!({"size": 3}));
    assert!(stored.data.get("extra").is_none(), "{:?}", stored.data);
    env.cleanup().await;
}

#[tokio::test]
async fn write_with_stale_resource_version_conflicts() {
    let env = TestEnv::new().await;
    let api = widgets(&env).await;
    let stale = api
        .create(&PostParams::default(), &widget("contested", 1))
        .await
        .unwrap();
    api.patch(
        "contested",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .unwrap();

    let mut update = stale.clone();
    update.spec.size = 5;
    let status = api_error(
        api.replace("contested", &PostParams::default(), &update)
            .await,
        "409 for a stale resourceVersion",
    );
    assert_eq!(status.code, 409, "{status:?}");
    assert!(status.is_conflict(), "{status:?}");
    assert_eq!(api.get("contested").await.unwrap().spec.size, 2);

    // A JSON patch with a resourceVersion `test` op is guarded the same way.
    let rv = stale.resource_version().unwrap();
    let guarded: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "replace", "path": "/spec/size", "value": 7},
    ]))
    .unwrap();
    let status = api_error(
        api.patch(
            "contested",
            &PatchParams::default(),
            &Patch::Json::<()>(guarded),
        )
        .await,
        "an error for a failed test op",
    );
    assert_eq!(status.code, 422, "{status:?}");
    env.cleanup().await;
}

#[tokio::test]
async fn status_subresource_separates_spec_and_status() {
    let env = TestEnv::new().await;
    let api = widgets(&env).await;
    let created = api
        .create(&PostParams::default(), &widget("split", 1))
        .await
        .unwrap();

    // Spec changes sent through /status are ignored; the status change is kept.
    let after_status = api
        .patch_status(
            "split",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 9}, "status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    assert_eq!(after_status.spec.size, 1);
    assert_eq!(after_status.status.unwrap().phase.as_deref(), Some("Ready"));
    assert_eq!(
        after_status.metadata.generation,
        created.metadata.generation
    );

    // And status changes sent to the main resource are ignored.
    let after_main = api
        .patch(
            "split",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}, "status": {"phase": "Lost"}})),
        )
        .await
        .unwrap();
    assert_eq!(after_main.spec.size, 2);
    assert_eq!(after_main.status.unwrap().phase.as_deref(), Some("Ready"));
    assert!(after_main.metadata.generation > created.metadata.generation);
    env.cleanup().await;
}

#[tokio::test]
async fn finalizer_holds_deletion_until_removed() {
    let env = TestEnv::new().await;
    let api = widgets(&env).await;
    let finalizer = format!("{GROUP}/hold");
    let mut held = widget("held", 1);
    held.metadata.finalizers = Some(vec![finalizer.clone()]);
    api.create(&PostParams::default(), &held).await.unwrap();

    let deleted = api.delete("held", &DeleteParams::default()).await.unwrap();
    let deleting = deleted.left().expect("deletion is pending, not done");
    assert!(deleting.metadata.deletion_timestamp.is_some());

    // Still there, still writable, but it cannot gain new finalizers.
    let live = api.get("held").await.unwrap();
    assert!(live.metadata.deletion_timestamp.is_some());
    assert_eq!(live.finalizers(), std::slice::from_ref(&finalizer));
    let status = api_error(
        api.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": [finalizer, format!("{GROUP}/more")]}}),
            ),
        )
        .await,
        "an error for a new finalizer on a deleting object",
    );
    assert_eq!(status.code, 422, "{status:?}");
    assert!(status.message.contains("no new finalizers"), "{status:?}");

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the object to be gone", TIMEOUT, || async {
        api.get_opt("held").await.unwrap().is_none().then_some(())
    })
    .await;
    env.cleanup().await;
}

#[tokio::test]
async fn watch_from_too_old_resource_version_is_gone() {
    let env = TestEnv::new().await;
    let api = widgets(&env).await;
    let created = api
        .create(&PostParams::default(), &widget("watched", 1))
        .await
        .unwrap();

    // A watch from the current version works...
    let mut stream = api
        .watch(
            &WatchParams::default().timeout(30),
            &created.resource_version().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    api.patch(
        "watched",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .unwrap();
    match tokio::time::timeout(TIMEOUT, stream.try_next()).await {
        Ok(Ok(Some(WatchEvent::Modified(w)))) => assert_eq!(w.spec.size, 2),
        other => panic!("expected a Modified event, got {other:?}"),
    }

    // ...one from a version older than the server keeps (the cluster's first revisions, long
    // compacted out of the watch cache) is answered with 410 Gone.
    let code = match api.watch(&WatchParams::default().timeout(30), "1").await {
        Err(kube::Error::Api(status)) => status.code,
        Err(e) => panic!("expected 410 Gone, got {e}"),
        Ok(stream) => match tokio::time::timeout(TIMEOUT, stream.boxed().try_next())
            .await
            .expect("an answer to the watch")
        {
            Ok(Some(WatchEvent::Error(status))) => status.code,
            Err(kube::Error::Api(status)) => status.code,
            other => panic!("expected 410 Gone, got {other:?}"),
        },
    };
    assert_eq!(code, 410);
    env.cleanup().await;
}

#[tokio::test]
async fn service_account_needs_a_role_binding() {
    let env = TestEnv::new().await;
    widgets(&env).await;
    let robot = env.client_as_service_account("robot").await;
    let as_robot: Api<Widget> = Api::namespaced(robot.clone(), &env.namespace);

    let status = api_error(as_robot.list(&Default::default()).await, "403");
    assert_eq!(status.code, 403, "{status:?}");
    assert!(status.is_forbidden());

    let reads_widgets = json!([
        {"apiGroups": [GROUP], "resources": ["widgets"], "verbs": ["get", "list", "watch"]},
    ]);
    env.grant("robot-reads-widgets", "robot", reads_widgets)
        .await;

    // The authorizer sees new bindings through an informer: allow it a moment.
    eventually("the RoleBinding to take effect", TIMEOUT, || async {
        as_robot.list(&Default::default()).await.ok()
    })
    .await;
    // The binding grants reading only, and only in this namespace.
    let status = api_error(
        as_robot
            .create(&PostParams::default(), &widget("by-robot", 1))
            .await,
        "403 for a verb the Role lacks",
    );
    assert_eq!(status.code, 403, "{status:?}");
    let elsewhere: Api<Widget> = Api::namespaced(robot, "default");
    let status = api_error(
        elsewhere.list(&Default::default()).await,
        "403 in another namespace",
    );
    assert_eq!(status.code, 403, "{status:?}");
    env.cleanup().await;
}

#[tokio::test]
async fn server_side_apply_detects_conflicting_managers() {
    let env = TestEnv::new().await;
    let api = widgets(&env).await;
    let apply = |color: &str| {
        json!({
            "apiVersion": format!("{GROUP}/v1"),
            "kind": "Widget",
            "metadata": {"name": "shared"},
            "spec": {"size": 1, "color": color},
        })
    };
    api.patch(
        "shared",
        &PatchParams::apply("alice"),
        &Patch::Apply(apply("red")),
    )
    .await
    .unwrap();
    let status = api_error(
        api.patch(
            "shared",
            &PatchParams::apply("bob"),
            &Patch::Apply(apply("blue")),
        )
        .await,
        "409 for a field owned by another manager",
    );
    assert_eq!(status.code, 409, "{status:?}");
    let forced = api
        .patch(
            "shared",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(apply("blue")),
        )
        .await
        .unwrap();
    assert_eq!(forced.spec.color.as_deref(), Some("blue"));
    env.cleanup().await;
}

#[tokio::test]
async fn deleting_a_namespace_with_objects_completes() {
    let env = TestEnv::new().await;
    let api = widgets(&env).await;
    for i in 1..=3 {
        api.create(&PostParams::default(), &widget(&format!("w{i}"), i))
            .await
            .unwrap();
    }
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".to_owned()),
            ..Default::default()
        },
        data: Some([("a".to_owned(), "b".to_owned())].into()),
        ..Default::default()
    };
    env.api::<ConfigMap>()
        .create(&PostParams::default(), &config_map)
        .await
        .unwrap();
    env.client_as_service_account("doomed").await;

    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    namespaces
        .delete(&env.namespace, &DeleteParams::default())
        .await
        .unwrap();
    // The namespace controller (kube-controller-manager) empties it, then it disappears.
    eventually(
        "the namespace to be deleted",
        Duration::from_secs(90),
        || async {
            namespaces
                .get_opt(&env.namespace)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        },
    )
    .await;
    env.cleanup().await;
}

#[tokio::test]
async fn owner_references_cascade_through_the_garbage_collector() {
    let env = TestEnv::new().await;
    let config_maps = env.api::<ConfigMap>();
    let named = |name: &str| ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    let owner = config_maps
        .create(&PostParams::default(), &named("owner"))
        .await
        .unwrap();
    let mut dependent = named("dependent");
    dependent.metadata.owner_references = Some(vec![owner.controller_owner_ref(&()).unwrap()]);
    config_maps
        .create(&PostParams::default(), &dependent)
        .await
        .unwrap();

    config_maps
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    // kube-controller-manager's garbage collector deletes the orphaned dependent.
    eventually("the dependent to be collected", TIMEOUT, || async {
        config_maps
            .get_opt("dependent")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    env.cleanup().await;
}

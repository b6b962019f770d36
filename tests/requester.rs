//! The requester of a claim (§5.7, §12.3 step 7): templates see `requester_user` and
//! `requester_identity`, and resources get the requester annotations. OpenShift's
//! `user.openshift.io` API is installed here as CRDs of the same shape (cluster-scoped `User`
//! and `Identity`), since the local control plane is plain Kubernetes.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use poolboy::api::OperatorDomain;
use poolboy::api::ResourceClaim;
use poolboy::api::kinds::Kinds;
use serde_json::{Value, json};
use support::objects::{handle_name, resource_name};
use support::operator::TestOperator;
use support::{TestEnv, wait_for};

const WAIT: Duration = Duration::from_secs(60);

fn openshift_crd(kind: &str, plural: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.user.openshift.io")},
        "spec": {
            "group": "user.openshift.io",
            "scope": "Cluster",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase()},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    }))
    .expect("a CRD")
}

fn openshift(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("user.openshift.io", "v1", kind),
        plural,
    )
}

async fn create(env: &TestEnv, resource: &ApiResource, namespaced: bool, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).expect("a valid object");
    let api = if namespaced {
        Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.namespace, resource)
    } else {
        Api::<DynamicObject>::all_with(env.client.clone(), resource)
    };
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating {resource:?}: {e}"),
    }
}

fn provider(env: &TestEnv) -> Value {
    json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceProvider",
        "metadata": {"name": "requested", "namespace": env.namespace},
        "spec": {
            "template": {"enable": true},
            "override": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"namespace": env.namespace},
                "data": {
                    "user": "{{ requester_user.metadata.name | default('nobody') }}",
                    "email": "{{ requester_identity.extra.email | default('none') }}",
                },
            },
        },
    })
}

fn claim(env: &TestEnv) -> Value {
    json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "mine", "namespace": env.namespace},
        "spec": {"resources": [{"provider": {"name": "requested"}}]},
    })
}

async fn configmap_of_claim(env: &TestEnv) -> ConfigMap {
    let claims: Api<ResourceClaim> = env.api();
    let claim = wait_for(&claims, "mine", "bound", WAIT, |c| handle_name(c).is_some()).await;
    let name = resource_name(handle_name(&claim).unwrap_or_default(), 0);
    wait_for(&env.api::<ConfigMap>(), &name, "exists", WAIT, |_| true).await
}

#[tokio::test]
async fn a_namespace_without_annotations_has_no_requester() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let kinds = Kinds::new(&OperatorDomain::default());
    create(&env, &kinds.provider, true, provider(&env)).await;
    create(&env, &kinds.claim, true, claim(&env)).await;
    let configmap = configmap_of_claim(&env).await;
    let data = configmap.data.unwrap_or_default();
    assert_eq!(data["user"], "nobody");
    let annotations = configmap.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key("poolboy.gpte.redhat.com/resource-requester-user"));
    env.teardown([operator]).await;
}

/// The upstream scenario "requester variables": on plain Kubernetes the User GET
/// answers 404, so Poolboy's stub names the requester. (When another test of this suite has
/// installed the stand-in `user.openshift.io` API, the user simply does not exist: the same
/// 404, the same stub.)
#[tokio::test]
async fn a_requester_without_a_user_object_is_poolboys_stub() {
    let env = TestEnv::new().await;
    let user = format!("test-user-{}", support::random_suffix());
    env.annotate_requester(&user).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let kinds = Kinds::new(&OperatorDomain::default());
    let mut requested = provider(&env);
    // Without `| default`: an absent requester would fail the definition.
    requested["spec"]["override"]["data"] = json!({
        "user": "{{ requester_user.metadata.name }}",
        "identities": "{{ requester_identities | length }}",
    });
    create(&env, &kinds.provider, true, requested).await;
    create(&env, &kinds.claim, true, claim(&env)).await;
    let configmap = configmap_of_claim(&env).await;
    let data = configmap.data.unwrap_or_default();
    assert_eq!(data["user"], user);
    assert_eq!(data["identities"], "0");
    let annotations = configmap.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations["poolboy.gpte.redhat.com/resource-requester-user"],
        user
    );
    env.teardown([operator]).await;
}

#[tokio::test]
async fn the_openshift_requester_reaches_templates_and_annotations() {
    let env = TestEnv::new().await;
    support::apply_crds(
        &env.client,
        &[
            openshift_crd("User", "users"),
            openshift_crd("Identity", "identities"),
        ],
    )
    .await;
    let user = format!("alice-{}", support::random_suffix());
    // OpenShift names identities `<provider>:<user>`; the stand-in CRD validates names as
    // DNS subdomains (no colon), so this one uses a dot. The operator only follows the name.
    let identity = format!("htpasswd.{user}");
    create(
        &env,
        &openshift("User", "users"),
        false,
        json!({
            "apiVersion": "user.openshift.io/v1", "kind": "User",
            "metadata": {"name": user}, "identities": [identity],
        }),
    )
    .await;
    create(
        &env,
        &openshift("Identity", "identities"),
        false,
        json!({
            "apiVersion": "user.openshift.io/v1", "kind": "Identity",
            "metadata": {"name": identity},
            "extra": {"email": "alice@example.com", "name": "Alice", "preferred_username": "alice"},
        }),
    )
    .await;
    env.annotate_requester(&user).await;

    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let kinds = Kinds::new(&OperatorDomain::default());
    create(&env, &kinds.provider, true, provider(&env)).await;
    create(&env, &kinds.claim, true, claim(&env)).await;
    let configmap = configmap_of_claim(&env).await;
    let data = configmap.data.unwrap_or_default();
    assert_eq!(data["user"], user);
    assert_eq!(data["email"], "alice@example.com");
    let annotations = configmap.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations["poolboy.gpte.redhat.com/resource-requester-user"],
        user
    );
    assert_eq!(
        annotations["poolboy.gpte.redhat.com/resource-requester-email"],
        "alice@example.com"
    );
    assert_eq!(
        annotations["poolboy.gpte.redhat.com/resource-requester-preferred-username"],
        "alice"
    );
    env.teardown([operator]).await;
}

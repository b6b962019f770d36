//! The claim controller's gates on the real API server (issue 5): approval (§6.1), the
//! provider's `resourceClaimAnnotations`/`resourceClaimLabels` (§6.1), and `autoDelete` /
//! `autoDetach` (§7 steps 9–10, §7.5). The whole operator runs: handles create ConfigMaps.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use poolboy::api::{ResourceClaim, ResourceHandle, ResourceProvider};
use serde_json::{Value, json};
use support::objects::{self, D, handle_name, merged};
use support::operator::TestOperator;
use support::{TestEnv, create, from_json, gone, wait_for};

const TIMEOUT: Duration = Duration::from_secs(30);

/// A provider of one ConfigMap, ready once labelled `ready: yes`, with `extra` merged into its
/// spec.
fn provider(namespace: &str, name: &str, extra: Value) -> ResourceProvider {
    let spec = json!({
        "override": {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"namespace": namespace}},
        "template": {"definition": {"data": {"a": "b"}}},
        "readinessCheck": "metadata.labels.ready | default('no') == 'yes'",
    });
    objects::provider(name, merged(spec, extra))
}

/// A provider claim of `provider`, with `extra` merged into its spec.
fn claim(name: &str, provider: &str, extra: Value) -> ResourceClaim {
    objects::claim(name, merged(json!({"provider": {"name": provider}}), extra))
}

fn approval(claim: &ResourceClaim) -> Value {
    json!(claim.status.as_ref().and_then(|s| s.approval.as_ref()))
}

struct Apis {
    claims: Api<ResourceClaim>,
    handles: Api<ResourceHandle>,
    configmaps: Api<ConfigMap>,
}

impl Apis {
    async fn new(env: &TestEnv, providers: Vec<ResourceProvider>) -> Self {
        for provider in providers {
            env.create(&provider).await;
        }
        Self {
            claims: env.api(),
            handles: env.api(),
            configmaps: env.api(),
        }
    }

    async fn create_claim(&self, claim: &ResourceClaim) {
        create(&self.claims, claim).await;
    }

    async fn claim_when(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ResourceClaim) -> bool,
    ) -> ResourceClaim {
        wait_for(&self.claims, name, what, TIMEOUT, check).await
    }

    /// Once claim `name` is bound and its handle has made its ConfigMap: (handle, ConfigMap).
    async fn provisioned(&self, env: &TestEnv, name: &str) -> (String, String) {
        let bound = self
            .claim_when(name, "bound", |c| handle_name(c).is_some())
            .await;
        let handle = handle_name(&bound).unwrap_or_default().to_owned();
        let configmap = env.configmap_of(&handle, TIMEOUT).await;
        (handle, configmap)
    }

    async fn patch_claim_status(&self, name: &str, status: Value) {
        self.claims
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .expect("patching claim status");
    }
}

#[tokio::test]
async fn approval_pending_then_approved_binds_and_rejected_never_does() {
    let env = TestEnv::new().await;
    let apis = Apis::new(
        &env,
        vec![
            provider(
                &env.namespace,
                "gated",
                json!({"approval": {"required": true, "pendingMessage": "Ask an admin."}}),
            ),
            provider(
                &env.namespace,
                "gated-default",
                json!({"approval": {"required": true}}),
            ),
        ],
    )
    .await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);

    apis.create_claim(&claim("approve-me", "gated", json!({})))
        .await;
    apis.create_claim(&claim("reject-me", "gated-default", json!({})))
        .await;
    let pending = apis
        .claim_when("approve-me", "pending", |c| {
            approval(c) == json!({"state": "pending", "message": "Ask an admin."})
        })
        .await;
    assert_eq!(handle_name(&pending), None);
    let pending = apis
        .claim_when("reject-me", "pending", |c| {
            approval(c) == json!({"state": "pending", "message": "Approval pending."})
        })
        .await;
    assert_eq!(handle_name(&pending), None);

    // Rejected first, then the other approved: once the approved one is bound, the rejected
    // one has been reconciled after its rejection and still has no handle.
    apis.patch_claim_status("reject-me", json!({"approval": {"state": "rejected"}}))
        .await;
    apis.patch_claim_status("approve-me", json!({"approval": {"state": "approved"}}))
        .await;
    let bound = apis
        .claim_when("approve-me", "bound", |c| handle_name(c).is_some())
        .await;
    assert_eq!(approval(&bound)["state"], "approved");
    env.configmap_of(handle_name(&bound).unwrap_or_default(), TIMEOUT)
        .await;

    let rejected = apis
        .claims
        .get("reject-me")
        .await
        .expect("the rejected claim");
    assert_eq!(handle_name(&rejected), None);
    assert_eq!(approval(&rejected)["state"], "rejected");
    let handles = apis
        .handles
        .list(&ListParams::default())
        .await
        .expect("list handles");
    assert_eq!(
        handles.items.len(),
        1,
        "only the approved claim has a handle"
    );

    env.teardown([operator]).await;
}

#[tokio::test]
async fn auto_delete_deletes_the_claim_once_its_handle_is_ready() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env, vec![provider(&env.namespace, "plain", json!({}))]).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);

    let when = json!({"autoDelete": {"when": "resource_handle.status.ready | default(false)"}});
    apis.create_claim(&claim("short-lived", "plain", when))
        .await;
    let (handle, configmap) = apis.provisioned(&env, "short-lived").await;
    // Not ready yet: the claim stays.
    assert!(
        apis.claims
            .get_opt("short-lived")
            .await
            .expect("read")
            .is_some()
    );

    env.label_configmap(&configmap, "ready", "yes").await;
    gone(&apis.claims, "short-lived", TIMEOUT).await;
    gone(&apis.handles, &handle, TIMEOUT).await;
    gone(&apis.configmaps, &configmap, TIMEOUT).await;

    env.teardown([operator]).await;
}

#[tokio::test]
async fn auto_detach_deletes_the_handle_and_keeps_the_detached_claim() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env, vec![provider(&env.namespace, "plain", json!({}))]).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);

    let when = json!({"autoDetach": {"when": "status.ready | default(false) or resource_handle.status.ready | default(false)"}});
    apis.create_claim(&claim("detach-me", "plain", when)).await;
    let (handle, configmap) = apis.provisioned(&env, "detach-me").await;

    env.label_configmap(&configmap, "ready", "yes").await;
    gone(&apis.handles, &handle, TIMEOUT).await;
    gone(&apis.configmaps, &configmap, TIMEOUT).await;
    let detached = apis
        .claims
        .get("detach-me")
        .await
        .expect("the detached claim stays");
    let reference = detached
        .status
        .as_ref()
        .and_then(|s| s.resource_handle.as_ref())
        .expect("status.resourceHandle kept");
    assert_eq!(reference.name, handle);
    assert_eq!(reference.detached, Some(true));
    assert!(detached.metadata.deletion_timestamp.is_none());

    env.teardown([operator]).await;
}

/// A Role in the test namespace: `rules` as JSON, bound to ServiceAccount `account`.
async fn grant(env: &TestEnv, name: &str, account: &str, rules: Value) {
    let roles: Api<Role> = env.api();
    let bindings: Api<RoleBinding> = env.api();
    let role: Role = from_json(json!({"metadata": {"name": name}, "rules": rules}));
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("creating a Role");
    let binding: RoleBinding = from_json(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": env.namespace}],
    }));
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("creating a RoleBinding");
}

#[tokio::test]
async fn a_detached_claim_retries_deleting_its_handle_until_it_succeeds() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env, vec![provider(&env.namespace, "plain", json!({}))]).await;
    // The operator runs as a ServiceAccount that may do everything it needs here except
    // delete handles: the delete that follows the detach fails with 403.
    grant(
        &env,
        "operator",
        "operator",
        json!([
            {"apiGroups": [D], "verbs": ["*"], "resources": [
                "resourceclaims", "resourceclaims/status", "resourcehandles/status",
                "resourcepools", "resourcepools/status", "resourceproviders",
                "resourceproviders/status", "resourcepoolscalings",
                "resourcepoolscalings/status", "resourcewatches"]},
            {"apiGroups": [D], "resources": ["resourcehandles"],
             "verbs": ["get", "list", "watch", "create", "update", "patch"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["*"], "verbs": ["*"]},
        ]),
    )
    .await;
    let client = env.client_as_service_account("operator").await;
    let operator = TestOperator::start(client, &env.namespace);

    let when = json!({"autoDetach": {"when": "resource_handle.status.ready | default(false)"}});
    apis.create_claim(&claim("detach-me", "plain", when)).await;
    let (handle, configmap) = apis.provisioned(&env, "detach-me").await;
    env.label_configmap(&configmap, "ready", "yes").await;
    apis.claim_when("detach-me", "detached", |c| {
        c.status
            .as_ref()
            .and_then(|s| s.resource_handle.as_ref())
            .is_some_and(|h| h.detached == Some(true))
    })
    .await;
    let refused = apis
        .handles
        .get(&handle)
        .await
        .expect("the handle stays while its delete is refused");
    assert!(refused.metadata.deletion_timestamp.is_none());

    // Allowed now: a retry of the detached claim deletes the handle, and its ConfigMap goes too.
    grant(
        &env,
        "operator-delete",
        "operator",
        json!([{"apiGroups": [D], "resources": ["resourcehandles"], "verbs": ["delete"]}]),
    )
    .await;
    gone(&apis.handles, &handle, TIMEOUT).await;
    gone(&apis.configmaps, &configmap, TIMEOUT).await;
    assert!(
        apis.claims
            .get_opt("detach-me")
            .await
            .expect("read")
            .is_some(),
        "the detached claim stays"
    );

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_template_error_in_auto_delete_is_reported_and_the_claim_stays() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env, vec![provider(&env.namespace, "plain", json!({}))]).await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);

    let when = json!({"autoDelete": {"when": "{{ broken"}});
    apis.create_claim(&claim("broken-when", "plain", when))
        .await;
    let claim = apis
        .claim_when("broken-when", "bound and invalid", |c| {
            handle_name(c).is_some()
                && c.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.type_ == "Valid"
                                && c.status == "False"
                                && c.message.contains("spec.autoDelete.when")
                        })
                    })
        })
        .await;
    // Treated as false: the claim stays bound and its resource is made.
    env.configmap_of(handle_name(&claim).unwrap_or_default(), TIMEOUT)
        .await;
    assert!(
        apis.claims
            .get_opt("broken-when")
            .await
            .expect("read")
            .is_some()
    );

    env.teardown([operator]).await;
}

#[tokio::test]
async fn provider_claim_annotations_and_labels_are_forced_onto_the_claim() {
    let env = TestEnv::new().await;
    let apis = Apis::new(
        &env,
        vec![provider(
            &env.namespace,
            "labelling",
            json!({
                "resourceClaimAnnotations": {"example.com/note": "from the provider"},
                "resourceClaimLabels": {"example.com/tier": "gold"},
            }),
        )],
    )
    .await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);

    apis.create_claim(&claim("labelled", "labelling", json!({})))
        .await;
    let has_them = |c: &ResourceClaim| {
        let annotation = c
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("example.com/note"))
            .map(String::as_str);
        let label = c
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("example.com/tier"))
            .map(String::as_str);
        annotation == Some("from the provider") && label == Some("gold")
    };
    apis.claim_when("labelled", "annotated, labelled and bound", |c| {
        has_them(c) && handle_name(c).is_some()
    })
    .await;

    // A user changing the label gets it put back, whenever it differs.
    let patch = json!({"metadata": {"labels": {"example.com/tier": "bronze"}}});
    apis.claims
        .patch("labelled", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("relabelling the claim");
    apis.claim_when("labelled", "label restored", has_them)
        .await;

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_changed_or_cleared_handle_end_earns_the_claim_an_event() {
    let env = TestEnv::new().await;
    let apis = Apis::new(
        &env,
        vec![provider(
            &env.namespace,
            "lasting",
            json!({"lifespan": {"default": "2h", "maximum": "1d"}}),
        )],
    )
    .await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);

    apis.create_claim(&claim("lasting", "lasting", json!({})))
        .await;
    let bound = apis
        .claim_when("lasting", "bound with a lifespan end", |c| {
            handle_name(c).is_some()
                && c.status
                    .as_ref()
                    .and_then(|s| s.lifespan.as_ref())
                    .is_some_and(|l| l.end.is_some())
        })
        .await;
    let handle = handle_name(&bound).unwrap_or_default().to_owned();

    // The handle's end moves: the claim follows, and says so, quoting the new end (Q8 fixed).
    let new_end = (chrono::Utc::now() + chrono::TimeDelta::hours(5))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let patch = json!({"spec": {"lifespan": {"end": new_end}}});
    apis.handles
        .patch(&handle, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("moving the handle's end");
    let event = env
        .event("lasting", "Normal", "Lifespan end changed", TIMEOUT)
        .await;
    assert!(
        event.note.as_deref().is_some_and(|n| n.contains(&new_end)),
        "{:?}",
        event.note
    );
    assert_eq!(event.action.as_deref(), Some("LifespanChange"));
    let regarding = event.regarding.expect("regarding");
    assert_eq!(regarding.api_version.as_deref(), Some(&*format!("{D}/v1")));
    assert_eq!(regarding.kind.as_deref(), Some("ResourceClaim"));

    // The handle's end goes: "cleared".
    let patch = json!({"spec": {"lifespan": {"end": null}}});
    apis.handles
        .patch(&handle, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("clearing the handle's end");
    env.event("lasting", "Normal", "Lifespan end cleared", TIMEOUT)
        .await;

    env.teardown([operator]).await;
}

//! A claim's life around its handle, on the real control plane: approval (§6.1), the
//! lifespan start gate (Δ B19), the provider's `resourceClaimAnnotations`/
//! `resourceClaimLabels` (§6.1), `autoDelete` / `autoDetach` (§7 steps 9–10, §7.5), and an
//! Event when the handle's end changes. The whole operator runs: handles create ConfigMaps.

mod support;

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use kube::api::{Api, ListParams, Patch, PatchParams};
use poolboy::api::{ResourceClaim, ResourceHandle, ResourceProvider};
use serde_json::{Value, json};
use support::apis::{Apis, bound};
use support::config::{
    config_resources, create_config_claim, create_config_provider, ready_handle,
};
use support::fixtures::{
    configmap, configmaps_of, create_named_handle, created, guid_name, handles, json_of, rfc3339,
};
use support::objects::{self, D, condition, handle_name, initialised_at, merged, resource_name};
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually, gone};

/// A provider of one ConfigMap, ready once labelled `ready: yes`, with `extra` merged into its
/// spec.
fn provider(namespace: &str, name: &str, extra: Value) -> ResourceProvider {
    let spec = json!({
        "template": {"definition": {"data": {"a": "b"}}},
        "readinessCheck": "metadata.labels.ready | default('no') == 'yes'",
    });
    objects::configmap_provider(namespace, name, merged(spec, extra))
}

/// A provider claim of `provider`, with `extra` merged into its spec.
fn claim(name: &str, provider: &str, extra: Value) -> ResourceClaim {
    objects::claim(name, merged(json!({"provider": {"name": provider}}), extra))
}

fn approval(claim: &ResourceClaim) -> Value {
    json!(claim.status.as_ref().and_then(|s| s.approval.as_ref()))
}

#[tokio::test]
async fn approval_pending_then_approved_binds_and_rejected_never_does() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env);
    apis.create_providers(vec![
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
    ])
    .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);

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
    // §7 steps 3–4: a claim waiting for approval carries the finalizer, and is initialised
    // only once approved, as Poolboy does.
    for pending in [
        &pending,
        &apis.claims.get("approve-me").await.expect("a claim"),
    ] {
        assert_eq!(pending.metadata.finalizers, Some(vec![D.to_owned()]));
        assert_eq!(initialised_at(pending), None);
    }
    // It says why it waits, and its status names its provider, but no resources yet.
    let pending = apis
        .claim_when("approve-me", "its conditions", |c| {
            condition(c, "Ready").is_some()
        })
        .await;
    for type_ in ["Bound", "Ready"] {
        let waiting = condition(&pending, type_).expect("the condition");
        assert_eq!(
            (waiting.status.as_str(), waiting.reason.as_str()),
            ("False", "ApprovalPending")
        );
        assert_eq!(waiting.message, "waiting for approval: Ask an admin.");
    }
    let status = serde_json::to_value(&pending.status).expect("JSON");
    assert_eq!(status["provider"], json!({"name": "gated"}));
    assert_eq!(status.get("resources"), None);

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
    assert!(initialised_at(&bound).is_some());
    env.configmap_of(handle_name(&bound).unwrap_or_default(), TIMEOUT)
        .await;

    let rejected = apis
        .claims
        .get("reject-me")
        .await
        .expect("the rejected claim");
    assert_eq!(handle_name(&rejected), None);
    assert_eq!(approval(&rejected)["state"], "rejected");
    let rejected = apis
        .claim_when("reject-me", "its rejection said", |c| {
            condition(c, "Bound").is_some_and(|b| b.reason == "ApprovalRejected")
        })
        .await;
    assert_eq!(
        condition(&rejected, "Ready").map(|r| r.reason.as_str()),
        Some("ApprovalRejected")
    );
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
    let apis = Apis::new(&env);
    apis.create_providers(vec![provider(&env.namespace, "plain", json!({}))])
        .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);

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

/// The condition reads the claim's status as the pass that mirrors its handle writes it: the
/// claim turns ready in the same pass that sees its handle ready, and the echo of that write
/// wakes no other pass (upstream Poolboy's `test-auto-detach-01` detaches on a summary the
/// same way).
#[tokio::test]
async fn auto_detach_deletes_the_handle_and_keeps_the_detached_claim() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env);
    apis.create_providers(vec![provider(&env.namespace, "plain", json!({}))])
        .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);

    let when = json!({"autoDetach": {"when": "status.ready | default(false)"}});
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

/// An operator called `instance` running as the ServiceAccount `operator`, which may do what
/// `rules` allow in the test's namespace; its HTTP endpoints are served on the address given.
async fn operator_allowed(
    env: &TestEnv,
    rules: Value,
    instance: &str,
) -> (TestOperator, std::net::SocketAddr) {
    env.grant("operator", "operator", rules).await;
    let config = env.config_as_service_account("operator").await;
    let address = support::http::free_address();
    let operator = TestOperator::start_with(config, &env.namespace, Some(address), instance);
    (operator, address)
}

#[tokio::test]
async fn a_detached_claim_retries_deleting_its_handle_until_it_succeeds() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env);
    apis.create_providers(vec![provider(&env.namespace, "plain", json!({}))])
        .await;
    // The operator runs as a ServiceAccount that may do everything it needs here except
    // delete handles: the delete that follows the detach fails with 403.
    let (operator, _) = operator_allowed(
        &env,
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
        "operator",
    )
    .await;

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
    env.grant(
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

/// A broker without rights on a managed kind says so where users look, not only in the log:
/// the handle and the claim get a Warning Event `Forbidden` and a `Ready` condition with that
/// reason. Once allowed, the ConfigMap is made.
#[tokio::test]
async fn a_kind_the_broker_may_not_create_is_reported_on_handle_and_claim() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env);
    apis.create_providers(vec![provider(&env.namespace, "plain", json!({}))])
        .await;
    let (operator, address) = operator_allowed(
        &env,
        json!([
            {"apiGroups": [D], "resources": ["*"], "verbs": ["*"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["*"]},
        ]),
        "denied",
    )
    .await;

    apis.create_claim(&claim("denied", "plain", json!({})))
        .await;
    let (claim, handle) = apis.bound("denied").await;
    let handle = handle.metadata.name.unwrap_or_default();
    let ready_reason =
        |conditions: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>| {
            conditions
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .map(|c| (c.reason.clone(), c.message.clone()))
        };
    let (reason, message) = eventually("the handle's Ready condition", TIMEOUT, || async {
        let handle = apis.handles.get(&handle).await.ok()?;
        ready_reason(handle.status.as_ref().and_then(|s| s.conditions.as_ref()))
            .filter(|(reason, _)| reason == "Forbidden")
    })
    .await;
    assert!(message.contains("forbidden"), "{message}");
    eventually("the claim's Ready condition", TIMEOUT, || async {
        let claim = apis.claims.get("denied").await.ok()?;
        ready_reason(claim.status.as_ref().and_then(|s| s.conditions.as_ref()))
            .filter(|(reason, message)| reason == "Forbidden" && message.contains("forbidden"))
    })
    .await;
    let on_handle = env.event(&handle, "Warning", &reason, TIMEOUT).await;
    assert!(on_handle.note.is_some_and(|n| n.contains("forbidden")));
    env.event(
        &claim.metadata.name.unwrap_or_default(),
        "Warning",
        "Forbidden",
        TIMEOUT,
    )
    .await;
    // It cannot watch ConfigMaps either: not ready, and /readyz says which watch fails.
    support::http::readyz_forbidden(address, "ConfigMap").await;

    env.grant(
        "operator-configmaps",
        "operator",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]),
    )
    .await;
    eventually(
        "the ConfigMap once allowed",
        Duration::from_secs(60),
        || async {
            let handle = apis.handles.get(&handle).await.ok()?;
            let reason = ready_reason(handle.status.as_ref().and_then(|s| s.conditions.as_ref()))?;
            (reason.0 == "ResourcesNotReady").then_some(())
        },
    )
    .await;
    support::http::readyz_ready(address, TIMEOUT).await;

    env.teardown([operator]).await;
}

/// A watch the broker may not list keeps `/readyz` not ready, saying which; once allowed, it
/// is ready again at the watch's next list, though that list brings nothing to reconcile.
#[tokio::test]
async fn a_watch_the_broker_may_not_list_is_not_ready_until_its_next_list() {
    let env = TestEnv::new().await;
    let own = |kind: &str| [kind.to_owned(), format!("{kind}/status")];
    let allowed: Vec<String> = ["resourceclaims", "resourcehandles", "resourcepools"]
        .into_iter()
        .chain(["resourceproviders"])
        .flat_map(own)
        .collect();
    let (operator, address) = operator_allowed(
        &env,
        json!([
            {"apiGroups": [D], "resources": allowed, "verbs": ["*"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["*"]},
        ]),
        "unlisted",
    )
    .await;

    support::http::readyz_forbidden(address, "ResourcePoolScaling").await;

    env.grant(
        "operator-scalings",
        "operator",
        json!([{"apiGroups": [D], "resources": ["resourcepoolscalings"], "verbs": ["*"]}]),
    )
    .await;
    // The watch retries within seconds of its first failures (kube's backoff doubles from
    // 0.8 s); a failure is forgotten without news of the watch only a minute after the last.
    support::http::readyz_ready(address, Duration::from_secs(30)).await;

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_template_error_in_auto_delete_is_reported_and_the_claim_stays() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env);
    apis.create_providers(vec![provider(&env.namespace, "plain", json!({}))])
        .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);

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
    let apis = Apis::new(&env);
    apis.create_providers(vec![provider(
        &env.namespace,
        "labelling",
        json!({
            "resourceClaimAnnotations": {"example.com/note": "from the provider"},
            "resourceClaimLabels": {"example.com/tier": "gold"},
        }),
    )])
    .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);

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

/// Δ B19, acceptance (b): before `spec.lifespan.start` nothing happens to a claim (no handle
/// bound or created, no resource, no binding in its status); at its start it proceeds.
#[tokio::test]
async fn b19_a_claim_waits_for_its_lifespan_start() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    // An unbound matching handle is there all along: not even binding happens early.
    let spare = guid_name("spare");
    let resources = config_resources(&env, &[("config", json!({}))]);
    create_named_handle(&env, &spare, json!({}), json!({"resources": resources})).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    ready_handle(&env, &spare).await;
    let start_text = rfc3339(Utc::now() + TimeDelta::seconds(8));
    let start = DateTime::parse_from_rfc3339(&start_text)
        .expect("a timestamp")
        .with_timezone(&Utc);
    let spec = json!({"lifespan": {"start": start_text}});
    create_config_claim(&env, "later", json!({}), spec.clone(), json!({})).await;
    create_config_claim(&env, "later-too", json!({}), spec, json!({})).await;

    let claims: Api<ResourceClaim> = env.api();
    while Utc::now() < start - TimeDelta::milliseconds(1500) {
        for claim in ["later", "later-too"] {
            let claim = json_of(&claims, claim).await.expect("claim");
            assert!(
                claim["status"]["resourceHandle"].is_null(),
                "bound early: {claim}"
            );
        }
        let all = handles(&env).await;
        assert_eq!(all.len(), 1, "a handle was created early");
        assert!(
            all[0].spec.resource_claim.is_none(),
            "the spare handle was bound early"
        );
        assert_eq!(configmaps_of(&env, &spare).await.len(), 1);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let first = bound(&env, "later").await;
    let second = bound(&env, "later-too").await;
    assert!(
        first == spare || second == spare,
        "one of them takes the spare handle"
    );
    let created = if first == spare { second } else { first };
    let made = json_of(&env.api::<ResourceHandle>(), &created)
        .await
        .expect("handle");
    assert!(
        self::created(&made) >= start,
        "created at or after the start: {made}"
    );
    let created_cm = resource_name(&created, 0);
    eventually("the created handle's ConfigMap", TIMEOUT, || {
        configmap(&env, &created_cm)
    })
    .await;

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_changed_or_cleared_handle_end_earns_the_claim_an_event() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env);
    apis.create_providers(vec![provider(
        &env.namespace,
        "lasting",
        json!({"lifespan": {"default": "2h", "maximum": "1d"}}),
    )])
    .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);

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

/// A claim whose lifespan ends within a lead time has a `LifespanEnding` condition saying so
/// and a Warning Event per lead time crossed while it lived: a lead time longer than the
/// lifespan it was given is no news. Asking for an end past the maximum earns a Warning Event
/// naming the maximum that applies.
#[tokio::test]
async fn a_claim_is_warned_before_its_end_and_when_its_request_is_clamped() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env);
    apis.create_providers(vec![provider(
        &env.namespace,
        "short",
        json!({"lifespan": {"default": "1m", "maximum": "2h"}}),
    )])
    .await;
    // 24 h and 1 h are longer than the minute the claim lives: only 50 s is crossed.
    let leads = [
        TimeDelta::hours(24),
        TimeDelta::hours(1),
        TimeDelta::seconds(50),
    ];
    let operator =
        TestOperator::start_configured(env.kube_config(), &env.namespace, None, "operator", |c| {
            c.lifespan_warnings = leads.to_vec()
        });
    apis.create_claim(&claim("expiring", "short", json!({})))
        .await;
    let ending = |c: &ResourceClaim| {
        c.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "LifespanEnding"))
            .map(|c| (c.status.clone(), c.message.clone()))
    };
    let within = apis
        .claim_when("expiring", "warned of its end within 50 s", |c| {
            ending(c).is_some_and(|(status, message)| {
                status == "True" && message.ends_with("in less than 50s")
            })
        })
        .await;
    let warned = env
        .event("expiring", "Warning", "LifespanEnding", TIMEOUT)
        .await;
    assert_eq!(warned.note, ending(&within).map(|(_, m)| m));
    let warnings = env
        .api::<k8s_openapi::api::events::v1::Event>()
        .list(&ListParams::default())
        .await
        .expect("listing Events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("LifespanEnding"))
        .count();
    assert_eq!(
        warnings, 1,
        "no warning of a day or an hour the claim never lived"
    );

    // Five hours asked, two allowed: clamped, and said; two hours from the start, the end is
    // neither within 50 s nor within the hour yet, and a day is longer than the lifespan.
    let asked = Utc::now() + TimeDelta::hours(5);
    let patch =
        json!({"spec": {"lifespan": {"end": asked.format("%Y-%m-%dT%H:%M:%SZ").to_string()}}});
    apis.claims
        .patch("expiring", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("asking for a later end");
    let clamped = env
        .event("expiring", "Warning", "LifespanClamped", TIMEOUT)
        .await;
    let note = clamped.note.unwrap_or_default();
    assert!(note.contains("maximum 2h"), "{note}");
    apis.claim_when("expiring", "no longer ending soon", |c| {
        ending(c)
            .is_some_and(|(status, message)| status == "False" && !message.contains("less than"))
    })
    .await;

    env.teardown([operator]).await;
}

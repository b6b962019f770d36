//! One tenant's object that the broker cannot decode never stops it for the others.
//! The API server accepts objects nested 10,000 levels deep; kube's decoding of a LIST or a
//! WATCH event fails at 128 for the whole document. The broker's client screens every
//! collection read: such an object is set aside (a Warning Event, a `Valid` condition where
//! the status is the broker's to write) and every other object is served.
//!
//! Wrong types: the API server validates every typed field of the broker's kinds against the
//! CRD schema, which is generated from the same Rust types (a string for a boolean, an integer
//! for a string, a timestamp without an offset are all refused), so the depth is what a
//! tenant can get past it; the screening's unit tests cover wrong types.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use kube::api::PostParams;
use kube::api::{Api, DeleteParams, DynamicObject, GetParams, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use poolboy::api::{OperatorDomain, ResourceClaim};
use poolboy::runtime::client::broker_client;
use serde_json::json;
use serde_json::value::RawValue;
use support::config::{KIND_LABEL, create_config_claim, create_config_provider};
use support::fixtures::install_anarchy_subjects;
use support::objects::D;
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, apis, eventually};

/// The deepest object the API server accepts is deeper than this; it is far past the 128
/// levels at which kube's decoding of a LIST or a WATCH event fails.
const DEPTH: usize = 10_000;

/// The deepest spec an AnarchySubject can have: its field ownership
/// (`metadata.managedFields[].fieldsV1`) mirrors a map-typed spec, so its stored form nests
/// ten levels deeper, and the API server's own decoding stops at 10,000 (checked on
/// kube-apiserver 1.33: one level more is stored, but the API server's watches of the kind
/// then fail on it).
const SUBJECT_SPEC_DEPTH: usize = DEPTH - 10;

/// `{"a":{"a":…1…}}`, `levels` objects deep, as text: a `serde_json::Value` that deep could
/// be neither built nor dropped safely.
fn nested(levels: usize) -> String {
    format!("{}1{}", r#"{"a":"#.repeat(levels), "}".repeat(levels))
}

/// The claim collection of `namespace`.
fn claims_url(namespace: &str) -> String {
    format!("/apis/{D}/v1/namespaces/{namespace}/resourceclaims")
}

/// A `config` claim (see `support::config`) whose template also carries `deep`, nested so
/// that the whole claim is `DEPTH` levels deep: object > spec > resources > [0] > template
/// are five levels.
fn deep_claim(name: &str) -> String {
    let template = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"labels":{{"{KIND_LABEL}":"config"}}}},"data":{{}},"deep":{}}}"#,
        nested(DEPTH - 5)
    );
    format!(
        r#"{{"apiVersion":"{D}/v1","kind":"ResourceClaim","metadata":{{"name":"{name}"}},"spec":{{"resources":[{{"name":"config","template":{template}}}]}}}}"#
    )
}

/// Held by each test for its whole run. Writing a 10,000-level object costs the API server
/// enough that, with both tests' deep writes and watches at once on a busy machine, it broke
/// the other test's connections (`error reading a body from connection`); one at a time, each
/// test sees only what its own objects do.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Sends a raw request and returns the raw answer: the typed API would decode it, and fail.
/// A GET or PATCH that never reached the API server (the pooled connection it was given had
/// just been closed: `SendRequest`) is sent again, at most twice; both are idempotent here.
async fn raw(
    client: &Client,
    request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
) -> String {
    let request = request.expect("a request");
    let what = format!("{} {}", request.method(), request.uri());
    let resendable = matches!(*request.method(), http::Method::GET | http::Method::PATCH);
    let copy = |request: &http::Request<Vec<u8>>| {
        let mut copy = http::Request::new(request.body().clone());
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.headers_mut() = request.headers().clone();
        copy
    };
    for _ in 0..2 {
        match client.request_text(copy(&request)).await {
            Err(kube::Error::Service(error)) if resendable => {
                eprintln!("{what}: {error}; sending it again");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            result => return result.unwrap_or_else(|e| panic!("{what}: {e}")),
        }
    }
    client
        .request_text(request)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Creates `object` (JSON text) in `collection`.
async fn create_raw(client: &Client, collection: &str, object: String) {
    let request =
        kube::core::Request::new(collection).create(&PostParams::default(), object.into_bytes());
    raw(client, request).await;
}

/// Merge-patches object `name` of `collection` with `patch` (JSON text).
async fn patch_raw(client: &Client, collection: &str, name: &str, patch: String) {
    let patch = RawValue::from_string(patch).expect("JSON");
    let request = kube::core::Request::new(collection).patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    );
    raw(client, request).await;
}

async fn delete_raw(client: &Client, collection: &str, name: &str) {
    let request = kube::core::Request::new(collection).delete(name, &DeleteParams::default());
    raw(client, request).await;
}

/// A claim nested 10,000 levels deep exists before the operator starts. The
/// operator lists claims, binds a claim created after it, reports the deep one, and keeps
/// serving when a bound claim becomes that deep too, and again once it is fixed.
#[tokio::test]
async fn a_claim_nested_10000_levels_deep_is_set_aside_and_every_other_claim_is_served() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let claims_url = claims_url(&env.namespace);
    // The API server accepts it.
    create_raw(&env.client, &claims_url, deep_claim("deep")).await;
    // Today's kube cannot list the namespace's claims any more.
    let error = env
        .api::<ResourceClaim>()
        .list(&ListParams::default())
        .await
        .expect_err("kube's own decoding fails the whole list");
    assert!(error.to_string().contains("recursion limit"), "{error}");

    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_config_claim(&env, "control", json!({}), json!({}), json!({"n": "1"})).await;
    apis::bound(&env, "control").await;

    let event = env.event("deep", "Warning", "Undecodable", TIMEOUT).await;
    let note = event.note.unwrap_or_default();
    assert!(
        note.contains("nested deeper than 125 levels at /spec/resources/0/template/deep/a/a/"),
        "{note}"
    );
    assert!(
        note.contains("ignores this object until it is fixed"),
        "{note}"
    );
    // Its status says so too (read raw: the claim does not decode).
    eventually("the deep claim's Valid condition", TIMEOUT, || async {
        let request = kube::core::Request::new(&claims_url).get("deep", &GetParams::default());
        let text = raw(&env.client, request).await;
        text.contains(r#""reason":"Undecodable""#).then_some(())
    })
    .await;

    // A bound claim that becomes as deep is dropped from the operator's stores (its watch
    // event becomes a deletion), reported, and the others are still served.
    create_config_claim(&env, "later", json!({}), json!({}), json!({"n": "2"})).await;
    let handle = apis::bound(&env, "later").await;
    let deep_resources = format!(
        r#"{{"spec":{{"resources":[{{"name":"config","template":{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"labels":{{"{KIND_LABEL}":"config"}}}},"data":{{"n":"2"}},"deep":{}}}}}]}}}}"#,
        nested(DEPTH - 5)
    );
    patch_raw(&env.client, &claims_url, "later", deep_resources).await;
    env.event("later", "Warning", "Undecodable", TIMEOUT).await;
    create_config_claim(&env, "control-2", json!({}), json!({}), json!({"n": "3"})).await;
    apis::bound(&env, "control-2").await;

    // Fixed, it is served again: its controller sets `Valid` back to True.
    let fixed = json!({"spec": {"resources": [{"name": "config", "template": support::config::template(json!({"n": "2"}))}]}});
    env.api::<ResourceClaim>()
        .patch("later", &PatchParams::default(), &Patch::Merge(&fixed))
        .await
        .expect("fix the claim");
    apis::Apis::new(&env)
        .claim_when("later", "valid again, bound to its handle", |claim| {
            let status = claim.status.as_ref();
            let valid = status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Valid"))
                .is_some_and(|c| c.status == "True");
            let bound = status
                .and_then(|s| s.resource_handle.as_ref())
                .is_some_and(|h| h.name == handle);
            valid && bound
        })
        .await;

    operator.stop().await;
    // The harness lists claims with kube's own client when it tears down.
    delete_raw(&env.client, &claims_url, "deep").await;
    env.teardown([]).await;
}

/// A managed resource (a preserve-unknown-fields kind, read as `DynamicObject`)
/// nested 10,000 levels deep is screened out of the real API server's LIST and WATCH
/// responses, and reported; the others are listed and watched; once fixed or deleted it
/// leaves the quarantine.
#[tokio::test]
async fn a_managed_resource_nested_10000_levels_deep_is_screened_out_of_lists_and_watches() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let env = TestEnv::new().await;
    install_anarchy_subjects(&env.client).await;
    let kind = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("anarchy.gpte.redhat.com", "v1", "AnarchySubject"),
        "anarchysubjects",
    );
    let collection = format!(
        "/apis/anarchy.gpte.redhat.com/v1/namespaces/{}/anarchysubjects",
        env.namespace
    );
    let subject = |name: &str, spec: &str| {
        format!(
            r#"{{"apiVersion":"anarchy.gpte.redhat.com/v1","kind":"AnarchySubject","metadata":{{"name":"{name}"}},"spec":{spec}}}"#
        )
    };
    for name in ["plain-a", "plain-b"] {
        create_raw(&env.client, &collection, subject(name, r#"{"vars":{}}"#)).await;
    }
    create_raw(
        &env.client,
        &collection,
        subject("deep", &nested(SUBJECT_SPEC_DEPTH)),
    )
    .await;

    let unscreened =
        Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.namespace, &kind);
    let error = unscreened
        .list(&ListParams::default())
        .await
        .expect_err("kube's own decoding fails the whole list");
    assert!(error.to_string().contains("recursion limit"), "{error}");

    let (client, quarantine) =
        broker_client(env.kube_config(), &OperatorDomain::default()).expect("the broker's client");
    let subjects = Api::<DynamicObject>::namespaced_with(client, &env.namespace, &kind);
    let listed = subjects
        .list(&ListParams::default())
        .await
        .expect("the screened list");
    let mut names: Vec<String> = listed.items.iter().map(|s| s.name_any()).collect();
    names.sort();
    assert_eq!(names, ["plain-a", "plain-b"]);
    let quarantined = quarantine.objects();
    let [deep] = &quarantined[..] else {
        panic!("{quarantined:?}")
    };
    assert_eq!(
        (deep.kind.as_str(), deep.object.name.as_str()),
        ("AnarchySubject", "deep")
    );
    assert!(deep.problem.contains("at /spec/a/a/"), "{}", deep.problem);

    // A watch (list, then events) of the same collection through the screened client.
    let writer = reflector::store::Writer::new(kind.clone());
    let store: Store<DynamicObject> = writer.as_reader();
    let errors = Arc::new(AtomicUsize::new(0));
    let counted = errors.clone();
    let watch = tokio::spawn(
        reflector::reflector(
            writer,
            watcher::watcher(subjects, watcher::Config::default()),
        )
        .for_each(move |event| {
            if let Err(error) = event {
                eprintln!("watch error: {error}");
                counted.fetch_add(1, Ordering::Relaxed);
            }
            async {}
        }),
    );
    let names_in = |store: &Store<DynamicObject>| {
        let mut names: Vec<String> = store.state().iter().map(|s| s.name_any()).collect();
        names.sort();
        names
    };
    let quarantined_names = || {
        let mut names: Vec<String> = quarantine
            .objects()
            .into_iter()
            .map(|s| s.object.name)
            .collect();
        names.sort();
        names
    };
    let store_holds = |expected: &'static [&'static str]| {
        let store = store.clone();
        async move {
            eventually(
                &format!("the store holds {expected:?}"),
                TIMEOUT,
                || async { (names_in(&store) == expected).then_some(()) },
            )
            .await;
        }
    };
    store_holds(&["plain-a", "plain-b"]).await;

    // plain-a becomes too deep: its MODIFIED event arrives as a deletion.
    patch_raw(
        &env.client,
        &collection,
        "plain-a",
        format!(r#"{{"spec":{}}}"#, nested(SUBJECT_SPEC_DEPTH)),
    )
    .await;
    store_holds(&["plain-b"]).await;
    eventually("plain-a is quarantined", TIMEOUT, || async {
        (quarantined_names() == ["deep", "plain-a"]).then_some(())
    })
    .await;
    // Fixed (a merge patch replaces the nested object), it is back.
    patch_raw(
        &env.client,
        &collection,
        "plain-a",
        r#"{"spec":{"a":null,"vars":{}}}"#.to_owned(),
    )
    .await;
    store_holds(&["plain-a", "plain-b"]).await;
    eventually("plain-a leaves the quarantine", TIMEOUT, || async {
        (quarantined_names() == ["deep"]).then_some(())
    })
    .await;
    // Deleted, the deep one leaves it too.
    delete_raw(&env.client, &collection, "deep").await;
    eventually("the quarantine is empty", TIMEOUT, || async {
        quarantined_names().is_empty().then_some(())
    })
    .await;
    assert_eq!(errors.load(Ordering::Relaxed), 0, "the watch never failed");

    watch.abort();
    env.cleanup().await;
}

//! The admission webhook on the real API server: a broker in-process serves
//! `POST /validate-resourceclaim` over HTTPS with a certificate made here, and a
//! ValidatingWebhookConfiguration scoped to the test's namespace sends it the claims a user
//! (a ServiceAccount) creates and changes. A claim its provider's validation refuses is refused
//! by `create` and `patch` with the message its status would get; valid claims go in and bind;
//! an update that leaves the spec alone goes in even for an invalid claim; with the broker
//! gone, claims go in (fail open). A replica standing by for the Lease answers too, from the
//! providers it follows.

mod support;

use std::net::SocketAddr;
use std::path::PathBuf;

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use poolboy::api::{ResourceClaim, ResourceProvider};
use poolboy::runtime::webhook::{CERT_FILE, KEY_FILE, VALIDATE_CLAIM_PATH, WebhookOptions};
use serde_json::{Value, json};
use support::apis::Apis;
use support::http::free_address;
use support::objects::{self, D};
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually, from_json, random_suffix};

/// The webhook's name in its configuration (as the chart names it).
const WEBHOOK: &str = "resourceclaims.poolboy.gpte.redhat.com";
/// The ServiceAccount the tests act as: a user, not the broker.
const USER: &str = "user";

/// A provider claim's provider: `color` one of two, `seats` at most four.
fn lab(namespace: &str) -> ResourceProvider {
    objects::configmap_provider(
        namespace,
        "lab",
        json!({
            "template": {"definition": {"data": {"color": "{{ color }}"}}},
            "parameters": [
                {"name": "color", "required": true, "allowUpdate": true,
                 "validation": {"openAPIV3Schema": {"type": "string", "enum": ["blue", "green"]}}},
                {"name": "seats", "allowUpdate": true, "default": {"value": 1},
                 "validation": {"openAPIV3Schema": {"type": "integer"},
                                "checks": [{"name": "at most four seats", "check": "value <= 4"}]}},
            ],
        }),
    )
}

/// A resources claim's provider: ConfigMap templates labelled `kind: config`, never red.
fn config(namespace: &str) -> ResourceProvider {
    objects::configmap_provider(
        namespace,
        "config",
        json!({
            "match": {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"labels": {"kind": "config"}}},
            "matchIgnore": ["/data(/.*)?"],
            "validation": {
                "openAPIV3Schema": {
                    "type": "object",
                    "properties": {"data": {"type": "object",
                                            "additionalProperties": {"type": "string"}}},
                },
                "checks": [{"name": "never red",
                            "check": "(data | default({})).color | default('') != 'red'"}],
            },
        }),
    )
}

fn lab_claim(name: &str, parameters: Value) -> ResourceClaim {
    objects::claim(
        name,
        json!({"provider": {"name": "lab", "parameterValues": parameters}}),
    )
}

fn config_claim(name: &str, data: Value) -> ResourceClaim {
    let template = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"labels": {"kind": "config"}}, "data": data});
    objects::claim(name, json!({"resources": [{"template": template}]}))
}

/// A CA and a serving certificate for 127.0.0.1 in a directory of their own, as a
/// `kubernetes.io/tls` Secret mounts them; removed when dropped.
struct Certificates {
    dir: PathBuf,
    ca_pem: String,
}

impl Certificates {
    fn new() -> Self {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "poolboy admission test CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().expect("a CA key");
        let ca = CertifiedIssuer::self_signed(ca, ca_key).expect("the CA certificate");
        let key = KeyPair::generate().expect("a serving key");
        let mut serving =
            CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("serving parameters");
        serving
            .distinguished_name
            .push(DnType::CommonName, "poolboy webhook");
        let cert = serving
            .signed_by(&key, &ca)
            .expect("the serving certificate");

        let dir = std::env::temp_dir().join(format!("poolboy-webhook-{}", random_suffix()));
        std::fs::create_dir_all(&dir).expect("a certificate directory");
        std::fs::write(dir.join(CERT_FILE), cert.pem()).expect("writing tls.crt");
        std::fs::write(dir.join(KEY_FILE), key.serialize_pem()).expect("writing tls.key");
        Self {
            dir,
            ca_pem: ca.pem(),
        }
    }

    fn options(&self, address: SocketAddr) -> WebhookOptions {
        WebhookOptions {
            address,
            cert_dir: self.dir.clone(),
        }
    }
}

impl Drop for Certificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The webhook registered with the API server for the test's namespace only; deleted when
/// dropped, also after a failure (a leftover could only slow other tests' claims down: it
/// fails open).
struct Registration {
    name: String,
    config: kube::Config,
}

impl Registration {
    /// Sends the creates and updates of claims in `env`'s namespace to `address`, except
    /// those of the broker itself (the kubeconfig's identity), as the chart does for the
    /// broker's ServiceAccount.
    async fn new(env: &TestEnv, address: SocketAddr, certificates: &Certificates) -> Self {
        let broker = username(&env.client).await;
        let name = format!("poolboy-test-{}", env.namespace);
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&certificates.ca_pem);
        let configuration: ValidatingWebhookConfiguration = from_json(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": WEBHOOK,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "timeoutSeconds": 5,
                "clientConfig": {
                    "url": format!("https://{address}{VALIDATE_CLAIM_PATH}"),
                    "caBundle": ca_bundle,
                },
                "rules": [{
                    "apiGroups": [D], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["resourceclaims"], "scope": "Namespaced",
                }],
                "namespaceSelector": {"matchLabels":
                    {"kubernetes.io/metadata.name": env.namespace}},
                "matchConditions": [{
                    "name": "not-the-broker",
                    "expression": format!("request.userInfo.username != '{broker}'"),
                }],
            }],
        }));
        Api::<ValidatingWebhookConfiguration>::all(env.client.clone())
            .create(&PostParams::default(), &configuration)
            .await
            .unwrap_or_else(|e| panic!("creating ValidatingWebhookConfiguration {name}: {e}"));
        Self {
            name,
            config: env.kube_config(),
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let name = self.name.clone();
        support::clean_up_from_drop(self.config.clone(), |client| async move {
            let api = Api::<ValidatingWebhookConfiguration>::all(client);
            api.delete(&name, &Default::default()).await.ok()
        });
    }
}

/// Who `client` authenticates as.
async fn username(client: &Client) -> String {
    let review: SelfSubjectReview = from_json(json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
        "metadata": {},
    }));
    Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("a SelfSubjectReview")
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .expect("a username")
}

/// The claims `Api` of the ServiceAccount [`USER`], who may do anything to claims of the
/// test's namespace.
async fn user_claims(env: &TestEnv) -> Api<ResourceClaim> {
    let rules = json!([{"apiGroups": [D], "resources": ["resourceclaims"], "verbs": ["*"]}]);
    env.grant("user-claims", USER, rules).await;
    let user = env.client_as_service_account(USER).await;
    let claims: Api<ResourceClaim> = Api::namespaced(user, &env.namespace);
    // The authorizer sees new bindings through an informer.
    eventually("the user's RoleBinding to take effect", TIMEOUT, || async {
        claims.list(&Default::default()).await.ok()
    })
    .await;
    claims
}

/// What the API server answered to a refused request: its code and message.
fn refusal<T: std::fmt::Debug>(result: kube::Result<T>, what: &str) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message.clone()),
        other => panic!("{what}: expected a refusal, got {other:?}"),
    }
}

/// The message the webhook's refusal of `message` reaches the user with.
fn denied(message: &str) -> String {
    format!("admission webhook \"{WEBHOOK}\" denied the request: {message}")
}

fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        ..Default::default()
    }
}

/// Waits until the API server sends claims to the webhook (it reads its configuration through
/// an informer): a dry-run create of `invalid` is refused.
async fn await_webhook(claims: &Api<ResourceClaim>, invalid: &ResourceClaim) {
    eventually("the webhook to be called", TIMEOUT, || async {
        claims
            .create(&dry_run(), invalid)
            .await
            .is_err()
            .then_some(())
    })
    .await;
}

/// The claim's `Valid` condition message, once it is False.
fn invalid_message(claim: &ResourceClaim) -> Option<String> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Valid" && c.status == "False"))
        .map(|c| c.message.clone())
}

/// `poolboy_admission_reviews_total{operation, result}` of the broker at `metrics`.
async fn reviews(metrics: SocketAddr, operation: &str, result: &str) -> u64 {
    let (status, text) = support::http::get(metrics, "/metrics").await;
    assert_eq!(status, 200, "{text}");
    let series = format!(
        "poolboy_admission_reviews_total{{operation=\"{operation}\",result=\"{result}\"}} "
    );
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

#[tokio::test]
async fn a_claim_its_provider_refuses_is_refused_at_create_and_update() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env);
    let certificates = Certificates::new();
    let (webhook, metrics) = (free_address(), free_address());
    let operator = TestOperator::start_with_webhook(
        env.kube_config(),
        &env.namespace,
        metrics,
        "operator",
        None,
        certificates.options(webhook),
    );
    apis.create_providers(vec![lab(&env.namespace), config(&env.namespace)])
        .await;
    let claims = user_claims(&env).await;

    // Stored before the webhook existed: the broker finds it invalid.
    let bad_color = json!({"color": "purple"});
    claims
        .create(
            &PostParams::default(),
            &lab_claim("before", bad_color.clone()),
        )
        .await
        .expect("no webhook yet");
    let before = apis
        .claim_when("before", "invalid", |c| invalid_message(c).is_some())
        .await;
    let status_message = invalid_message(&before).unwrap_or_default();

    let _registration = Registration::new(&env, webhook, &certificates).await;
    await_webhook(&claims, &lab_claim("probe", bad_color.clone())).await;

    // The same claim is refused at the door, with the message its status says.
    let (code, message) = refusal(
        claims
            .create(&PostParams::default(), &lab_claim("refused", bad_color))
            .await,
        "a color not offered",
    );
    assert_eq!(code, 422, "{message}");
    assert_eq!(message, denied(&status_message));
    assert!(
        status_message
            .starts_with("spec.provider.parameterValues: Parameter color schema validation"),
        "{status_message}"
    );
    let (_, message) = refusal(
        claims
            .create(
                &PostParams::default(),
                &config_claim("red", json!({"color": "red"})),
            )
            .await,
        "a red config",
    );
    assert_eq!(
        message,
        denied("spec.resources[0]: Validation check failed: never red")
    );
    let (_, message) = refusal(
        claims
            .create(
                &PostParams::default(),
                &objects::claim("shapeless", json!({})),
            )
            .await,
        "a claim without provider or resources",
    );
    assert_eq!(
        message,
        denied("ResourceClaim has neither spec.provider nor spec.resources")
    );
    for name in ["refused", "red", "shapeless"] {
        assert!(apis.claims.get_opt(name).await.expect("reading").is_none());
    }

    // Valid claims go in and bind; a provider the broker does not know yet is waited for.
    claims
        .create(
            &PostParams::default(),
            &lab_claim("good", json!({"color": "blue"})),
        )
        .await
        .expect("a valid provider claim");
    claims
        .create(
            &PostParams::default(),
            &config_claim("green", json!({"color": "green"})),
        )
        .await
        .expect("a valid resources claim");
    claims
        .create(
            &PostParams::default(),
            &objects::claim("later", json!({"provider": {"name": "not-yet"}})),
        )
        .await
        .expect("a claim of a provider not created yet");
    assert_eq!(reviews(metrics, "CREATE", "warned").await, 1);
    apis.bound("good").await;

    // What `kubectl apply` shows the user: the refusal, and the warning. (On a thread of its
    // own: the broker answering the review runs on this test's runtime.)
    let kubectl_apply = |claim: &ResourceClaim| {
        let yaml = serde_json::to_string(claim).expect("a claim serialises");
        let namespace = env.namespace.clone();
        let user = format!("system:serviceaccount:{namespace}:{USER}");
        tokio::task::spawn_blocking(move || {
            let args = ["apply", "-n", &namespace, "--as", &user, "-f", "-"];
            support::tools::run("kubectl", &args, Some(&yaml), TIMEOUT)
        })
    };
    let applied = kubectl_apply(&lab_claim("applied", json!({"color": "blue", "seats": 5})))
        .await
        .expect("kubectl apply");
    assert!(!applied.success, "{applied:?}");
    assert!(
        applied.stderr.contains(&denied(
            "spec.provider.parameterValues: Parameter seats failed check: at most four seats"
        )),
        "{}",
        applied.stderr
    );
    let waiting = kubectl_apply(&objects::claim(
        "waiting",
        json!({"provider": {"name": "not-yet"}}),
    ))
    .await
    .expect("kubectl apply");
    assert!(waiting.success, "{waiting:?}");
    assert!(
        waiting
            .stderr
            .contains("Warning: ResourceProvider not-yet not found"),
        "{}",
        waiting.stderr
    );
    apis.bound("green").await;

    // A change its provider refuses is refused; the claim stays as it was.
    let patch = |parameters: Value| {
        Patch::Merge(json!({"spec": {"provider": {"parameterValues": parameters}}}))
    };
    let (code, message) = refusal(
        claims
            .patch("good", &PatchParams::default(), &patch(json!({"seats": 9})))
            .await,
        "nine seats",
    );
    assert_eq!(code, 422, "{message}");
    assert_eq!(
        message,
        denied("spec.provider.parameterValues: Parameter seats failed check: at most four seats")
    );
    let good = apis.claims.get("good").await.expect("reading good");
    let values = good.spec.provider.and_then(|p| p.parameter_values);
    assert_eq!(values.and_then(|v| v.get("seats").cloned()), None);
    claims
        .patch("good", &PatchParams::default(), &patch(json!({"seats": 3})))
        .await
        .expect("three seats are fine");

    // An update that leaves the spec alone is let through (it reaches the webhook): an
    // invalid claim can still be labelled, and deleted.
    let allowed = reviews(metrics, "UPDATE", "allowed").await;
    claims
        .patch(
            "before",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "blue"}}})),
        )
        .await
        .expect("labelling an invalid claim");
    assert_eq!(reviews(metrics, "UPDATE", "allowed").await, allowed + 1);
    claims
        .delete("before", &Default::default())
        .await
        .expect("deleting an invalid claim");
    support::gone(&apis.claims, "before", TIMEOUT).await;

    // Without the broker, claims go in, valid or not: the claim controller checks them when
    // it is back.
    operator.stop().await;
    claims
        .create(
            &PostParams::default(),
            &lab_claim("unchecked", json!({"color": "purple"})),
        )
        .await
        .expect("the webhook fails open");

    drop(_registration);
    env.teardown([]).await;
}

#[tokio::test]
async fn a_replica_standing_by_answers_from_the_providers_it_follows() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env);
    let certificates = Certificates::new();
    let lease = format!("poolboy-{}", random_suffix());
    let holder =
        TestOperator::start_leased(env.kube_config(), &env.namespace, "holder", &lease, None);
    let leases: Api<Lease> = env.api();
    eventually("the first operator to hold the Lease", TIMEOUT, || async {
        let lease = leases.get_opt(&lease).await.ok().flatten()?;
        let identity = lease.spec?.holder_identity?;
        identity.starts_with("holder-").then_some(())
    })
    .await;
    let webhook = free_address();
    let standby = TestOperator::start_with_webhook(
        env.kube_config(),
        &env.namespace,
        free_address(),
        "standby",
        Some(&lease),
        certificates.options(webhook),
    );
    apis.create_providers(vec![lab(&env.namespace)]).await;
    let claims = user_claims(&env).await;
    let _registration = Registration::new(&env, webhook, &certificates).await;
    await_webhook(&claims, &lab_claim("probe", json!({"color": "purple"}))).await;

    let (_, message) = refusal(
        claims
            .create(
                &PostParams::default(),
                &lab_claim("refused", json!({"color": "blue", "seats": 5})),
            )
            .await,
        "five seats",
    );
    assert_eq!(
        message,
        denied("spec.provider.parameterValues: Parameter seats failed check: at most four seats")
    );
    claims
        .create(
            &PostParams::default(),
            &lab_claim("good", json!({"color": "green"})),
        )
        .await
        .expect("a valid claim");
    apis.bound("good").await;

    // A provider created now reaches the standby's catalog too.
    apis.create_providers(vec![config(&env.namespace)]).await;
    let red = config_claim("red", json!({"color": "red"}));
    eventually(
        "the new provider to refuse a red config",
        TIMEOUT,
        || async {
            match claims.create(&dry_run(), &red).await {
                Err(kube::Error::Api(status)) => Some(status.message.clone()),
                _ => None,
            }
        },
    )
    .await;
    let (_, message) = refusal(
        claims.create(&PostParams::default(), &red).await,
        "a red config",
    );
    assert_eq!(
        message,
        denied("spec.resources[0]: Validation check failed: never red")
    );

    drop(_registration);
    env.teardown([standby, holder]).await;
}

//! Schedules take effect on time: templates comparing a time with the current time
//! are rendered again at the instant their outcome changes; templates printing the clock at
//! the configured interval; templates that do not read the clock never by time.
//!
//! These tests are about time passing, so they measure when something happens; they wait for
//! conditions, never for a fixed time, except over the quiet periods they assert on.

mod support;

use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use poolboy::api::{ResourceClaim, ResourceHandle};
use serde_json::{Value, json};

use support::fixtures::create_provider;
use support::objects::{self, handle_name, resource_name};
use support::operator::TestOperator;
use support::{TestEnv, eventually, gone, wait_for};

/// Long enough for a claim to bind and its resource to appear.
const SETTLE: Duration = Duration::from_secs(30);

/// How late a change may take effect.
const ON_TIME: Duration = Duration::from_secs(2);

/// `seconds` from now, whole seconds, as templates and claims write instants.
fn in_seconds(seconds: i64) -> (DateTime<Utc>, String) {
    let at = Utc::now() + TimeDelta::seconds(seconds);
    let at = DateTime::from_timestamp(at.timestamp(), 0).unwrap_or(at);
    (at, at.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// Waits until `what` holds and returns how long after `at` that was (zero when before).
async fn observed_after<F, Fut>(what: &str, at: DateTime<Utc>, check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<()>>,
{
    let timeout = (at - Utc::now()).to_std().unwrap_or_default() + SETTLE;
    eventually(what, timeout, check).await;
    (Utc::now() - at).to_std().unwrap_or_default()
}

/// A claim `name` of one resource from `provider`, with `extra` merged into its spec.
async fn create_claim(env: &TestEnv, name: &str, provider: &str, extra: Value) {
    let spec = json!({
        "resources": [{"provider": objects::provider_ref(provider, &env.namespace)}],
    });
    env.create(&objects::claim(name, objects::merged(spec, extra)))
        .await;
}

/// A provider spec whose resource is a ConfigMap in the test namespace, with `extra` merged in.
fn configmap_spec(env: &TestEnv, extra: Value) -> Value {
    let spec = json!({"override": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": env.namespace}}});
    objects::merged(spec, extra)
}

/// The name of the ConfigMap the claim `name`'s handle manages, once it exists.
async fn configmap_of_claim(env: &TestEnv, name: &str) -> String {
    let claims: Api<ResourceClaim> = env.api();
    let claim = wait_for(&claims, name, "bound", SETTLE, |c| handle_name(c).is_some()).await;
    let configmap = resource_name(handle_name(&claim).unwrap_or_default(), 0);
    wait_for(
        &env.api::<ConfigMap>(),
        &configmap,
        "exists",
        SETTLE,
        |_| true,
    )
    .await;
    configmap
}

async fn data(env: &TestEnv, configmap: &str, key: &str) -> Option<String> {
    let configmap = env.api::<ConfigMap>().get_opt(configmap).await.ok()??;
    configmap.data?.get(key).cloned()
}

/// The start/stop schedule of Babylon-style catalogues (upstream scenario "time-driven
/// re-rendering flips desired_state").
#[tokio::test]
async fn a_schedule_stops_on_time_and_starts_again_when_moved() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_provider(
        &env,
        "scheduled",
        json!({
            "template": {"enable": true},
            "default": {"data": {
                "start": "{{ timestamp.utcnow }}",
                "stop": "{{ timestamp.utcnow.add('8s') }}",
            }},
            // §12.2: without update filters an existing resource is never changed.
            "updateFilters": [{"pathMatch": "/data/.*"}],
            "override": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"namespace": env.namespace},
                "data": {"desired_state": "{%- if timestamp(resource_template.data.start) > timestamp.utcnow or timestamp(resource_template.data.stop) < timestamp.utcnow -%}stopped{%- else -%}started{%- endif -%}"},
            },
        }),
    )
    .await;
    create_claim(&env, "lab", "scheduled", json!({})).await;
    let configmap = configmap_of_claim(&env, "lab").await;
    let claims: Api<ResourceClaim> = env.api();
    let claim = wait_for(&claims, "lab", "defaulted", SETTLE, |_| true).await;
    let template = claim
        .spec
        .resources
        .as_deref()
        .and_then(|r| r.first())
        .and_then(|r| r.template.clone())
        .unwrap_or_default();
    let stop: DateTime<Utc> = template["data"]["stop"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no stop in the defaulted template {template}"));
    assert_eq!(
        data(&env, &configmap, "desired_state").await.as_deref(),
        Some("started"),
        "started before stop"
    );

    let late = observed_after("desired_state stopped", stop, || async {
        (data(&env, &configmap, "desired_state").await.as_deref() == Some("stopped")).then_some(())
    })
    .await;
    assert!(late <= ON_TIME, "stopped {late:?} after stop");

    // The user moves the schedule into the future: started again.
    let (_, later) = in_seconds(3600);
    let mut template = template;
    template["data"]["stop"] = json!(later);
    claims
        .patch(
            "lab",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": [{
                "provider": objects::provider_ref("scheduled", &env.namespace),
                "template": template,
            }]}})),
        )
        .await
        .expect("move the schedule");
    eventually("desired_state started again", SETTLE, || async {
        (data(&env, &configmap, "desired_state").await.as_deref() == Some("started")).then_some(())
    })
    .await;
    env.teardown([operator]).await;
}

#[tokio::test]
async fn an_auto_delete_comparing_a_time_deletes_the_claim_on_time() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_provider(&env, "plain", configmap_spec(&env, json!({}))).await;
    let (at, text) = in_seconds(6);
    create_claim(
        &env,
        "expiring",
        "plain",
        json!({"autoDelete": {"when": format!("timestamp('{text}') < timestamp.utcnow")}}),
    )
    .await;
    configmap_of_claim(&env, "expiring").await;
    let claims: Api<ResourceClaim> = env.api();
    let late = observed_after("the claim deleted", at, || async {
        let claim = claims.get_opt("expiring").await.ok()?;
        claim
            .is_none_or(|c| c.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await;
    assert!(late <= ON_TIME, "deleted {late:?} after its time");
    gone(&claims, "expiring", SETTLE).await;
    env.teardown([operator]).await;
}

/// A claim refused by a validation check that compares a time with now is looked at again
/// when the check would pass: it binds on time, with no edit to wake it.
#[tokio::test]
async fn a_claim_refused_until_a_time_binds_on_time() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let (at, text) = in_seconds(6);
    create_provider(
        &env,
        "opens-at",
        configmap_spec(
            &env,
            json!({"validation": {"checks": [{"name": "opens", "check": format!("timestamp('{text}') < timestamp.utcnow")}]}}),
        ),
    )
    .await;
    create_claim(&env, "early", "opens-at", json!({})).await;
    let claims: Api<ResourceClaim> = env.api();
    wait_for(&claims, "early", "refused by its check", SETTLE, |c| {
        handle_name(c).is_none()
            && c.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|conditions| {
                    conditions
                        .iter()
                        .any(|c| c.type_ == "Valid" && c.status == "False")
                })
    })
    .await;
    let late = observed_after("the claim bound", at, || async {
        let claim = claims.get_opt("early").await.ok()??;
        handle_name(&claim).map(|_| ())
    })
    .await;
    assert!(late <= ON_TIME, "bound {late:?} after its time");
    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_health_check_that_turns_false_at_a_time_shows_in_the_claim_on_time() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let (at, text) = in_seconds(6);
    create_provider(
        &env,
        "healthy-until",
        configmap_spec(
            &env,
            json!({"healthCheck": format!("timestamp('{text}') > timestamp.utcnow")}),
        ),
    )
    .await;
    create_claim(&env, "checked", "healthy-until", json!({})).await;
    let claims: Api<ResourceClaim> = env.api();
    wait_for(&claims, "checked", "healthy", SETTLE, |c| {
        c.status.as_ref().and_then(|s| s.healthy) == Some(true)
    })
    .await;
    let late = observed_after("the claim unhealthy", at, || async {
        let claim = claims.get_opt("checked").await.ok()??;
        (claim.status?.healthy == Some(false)).then_some(())
    })
    .await;
    assert!(late <= ON_TIME, "unhealthy {late:?} after its time");
    env.teardown([operator]).await;
}

/// A printed `now()` cannot say when it changes: it is rendered again every
/// `time_template_interval`, and written when it differs. Printed to the microsecond, it
/// differs at every render: the passes the broker's own writes cause (the handle's status, the
/// echo of the ConfigMap) render at the instant of the last refresh, or they would write it
/// again at once.
#[tokio::test]
async fn a_printed_now_is_refreshed_at_the_interval_and_not_more_often() {
    const INTERVAL: Duration = Duration::from_secs(3);
    let env = TestEnv::new().await;
    let operator = TestOperator::start_configured(
        env.kube_config(),
        &env.namespace,
        None,
        "operator",
        |config| config.time_template_interval = INTERVAL,
    );
    create_provider(
        &env,
        "stamped",
        json!({
            "template": {"enable": true},
            "updateFilters": [{"pathMatch": "/data/.*"}],
            "override": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"namespace": env.namespace},
                "data": {"at": "{{ now(true, '%FT%T.%fZ') }}"},
            },
        }),
    )
    .await;
    create_claim(&env, "stamped", "stamped", json!({})).await;
    let configmap = configmap_of_claim(&env, "stamped").await;

    // Every value the ConfigMap shows over four intervals, and when it first showed it.
    let mut seen: Vec<(Instant, String)> = Vec::new();
    let watched = Instant::now();
    while watched.elapsed() < INTERVAL * 4 {
        if let Some(at) = data(&env, &configmap, "at").await
            && seen.last().is_none_or(|(_, last)| *last != at)
        {
            seen.push((Instant::now(), at));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let changes: Vec<Duration> = seen
        .windows(2)
        .map(|pair| pair[1].0.duration_since(pair[0].0))
        .collect();
    assert!(
        changes.len() >= 2,
        "refreshed only {} times in {:?}: {seen:?}",
        changes.len(),
        INTERVAL * 4
    );
    for gap in &changes {
        assert!(
            *gap >= INTERVAL - Duration::from_millis(500),
            "refreshed after {gap:?}, more often than every {INTERVAL:?}: {seen:?}"
        );
    }
    env.teardown([operator]).await;
}

/// Objects whose templates do not read the clock are not rendered again by time: nothing is
/// written while nothing changes.
#[tokio::test]
async fn claims_whose_templates_do_not_read_the_clock_cause_no_writes() {
    const QUIET: Duration = Duration::from_secs(6);
    let env = TestEnv::new().await;
    let operator = TestOperator::start_configured(
        env.kube_config(),
        &env.namespace,
        None,
        "operator",
        // Short: a re-render by time would show within the quiet period.
        |config| config.time_template_interval = Duration::from_secs(1),
    );
    create_provider(
        &env,
        "timeless",
        json!({
            "template": {"enable": true},
            "updateFilters": [{"pathMatch": "/data/.*"}],
            "override": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"namespace": env.namespace},
                "data": {"name": "{{ resource_claim.metadata.name }}"},
            },
            "healthCheck": "true",
            "readinessCheck": "true",
            "statusSummaryTemplate": {"name": "{{ resource_claim.metadata.name }}"},
        }),
    )
    .await;
    let names = ["quiet-a", "quiet-b", "quiet-c"];
    for name in names {
        create_claim(&env, name, "timeless", json!({})).await;
    }
    let claims: Api<ResourceClaim> = env.api();
    for name in names {
        configmap_of_claim(&env, name).await;
        wait_for(&claims, name, "ready", SETTLE, |c| {
            c.status.as_ref().and_then(|s| s.ready) == Some(true)
        })
        .await;
    }

    let versions = || async {
        let mut versions = Vec::new();
        for claim in claims.list(&Default::default()).await.expect("claims") {
            versions.push(format!(
                "claim/{}@{:?}",
                claim.name_any(),
                claim.resource_version()
            ));
        }
        for handle in env
            .api::<ResourceHandle>()
            .list(&Default::default())
            .await
            .expect("handles")
        {
            versions.push(format!(
                "handle/{}@{:?}",
                handle.name_any(),
                handle.resource_version()
            ));
        }
        for configmap in env
            .api::<ConfigMap>()
            .list(&Default::default())
            .await
            .expect("configmaps")
        {
            versions.push(format!(
                "configmap/{}@{:?}",
                configmap.name_any(),
                configmap.resource_version()
            ));
        }
        versions.sort();
        versions
    };
    let before = versions().await;
    // The quiet period is what this test is about.
    tokio::time::sleep(QUIET).await;
    assert_eq!(versions().await, before, "writes while nothing changed");
    env.teardown([operator]).await;
}

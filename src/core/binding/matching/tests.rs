use kube::ResourceExt;
use std::collections::HashMap;

use chrono::TimeDelta;
use serde_json::{Value, json};

use super::*;
use crate::core::test_fixtures::{now, rfc3339};

/// A handle built from a JSON patch over a minimal unbound one-resource handle.
struct HandleBuilder(Value);

impl HandleBuilder {
    fn new(name: &str) -> Self {
        Self(json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1",
            "kind": "ResourceHandle",
            "metadata": {
                "name": name,
                "namespace": "poolboy",
                "creationTimestamp": "2026-11-21T10:00:00Z",
            },
            "spec": {
                "resources": [{
                    "provider": {"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceProvider",
                                 "name": "p", "namespace": "poolboy"},
                    "template": {"spec": {"size": "small"}},
                }],
            },
        }))
    }
    fn set(mut self, pointer: &str, value: Value) -> Self {
        let mut target = &mut self.0;
        for segment in pointer.trim_start_matches('/').split('/') {
            target = match target {
                Value::Array(list) => {
                    let index: usize = segment.parse().expect("test index");
                    if index == list.len() {
                        list.push(json!({}));
                    }
                    &mut list[index]
                }
                Value::Object(map) => map.entry(segment.to_owned()).or_insert(json!({})),
                other => panic!("test path through a scalar: {other}"),
            };
        }
        *target = value;
        self
    }
    fn build(self) -> ResourceHandle {
        serde_json::from_value(self.0).expect("valid handle")
    }
}

fn resource<'a>(name: Option<&'a str>, template: &'a Value) -> DesiredResource<'a> {
    DesiredResource {
        provider_name: "p",
        name,
        template: Some(template),
    }
}

fn ignores(patterns: &[&str]) -> HashMap<String, MatchIgnore> {
    let patterns: Vec<String> = patterns.iter().map(|s| (*s).to_owned()).collect();
    HashMap::from([(
        "p".to_owned(),
        MatchIgnore::compile(&patterns).expect("compiles"),
    )])
}

fn names(candidates: &[BindCandidate<'_>]) -> Vec<String> {
    candidates
        .iter()
        .map(|c| c.handle.metadata.name.clone().unwrap_or_default())
        .collect()
}

fn small() -> Value {
    json!({"spec": {"size": "small"}})
}

/// Candidates for a one-resource claim with the `small` template and no pool.
fn select(handles: &[ResourceHandle]) -> Vec<String> {
    let template = small();
    let claim = [resource(None, &template)];
    names(&bind_candidates(&claim, None, handles, &ignores(&[]), now()).expect("selects"))
}

// ---- provider match (§6.2) ----

#[test]
fn provider_matches_when_every_match_field_is_in_the_template() {
    let template =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1", "b": "2"}, "l": [1, 2]});
    assert!(provider_matches(&json!({"kind": "ConfigMap"}), &template));
    assert!(provider_matches(&json!({"data": {"a": "1"}}), &template));
    assert!(
        provider_matches(&json!({"l": [1]}), &template),
        "lists compare element-wise"
    );
    assert!(provider_matches(&json!({"l": [1, 2]}), &template));
    assert!(
        !provider_matches(&json!({"l": [1, 2, 3]}), &template),
        "extra list element"
    );
    assert!(!provider_matches(&json!({"l": [2]}), &template));
    assert!(!provider_matches(&json!({"kind": "Secret"}), &template));
    assert!(!provider_matches(&json!({"missing": null}), &template));
    assert!(
        !provider_matches(&json!({"data": "flat"}), &template),
        "type mismatch"
    );
    assert!(
        provider_matches(&json!({"n": 1.0}), &json!({"n": 1})),
        "numbers by value"
    );
    assert!(
        !provider_matches(&json!({"n": true}), &json!({"n": 1})),
        "bool is not a number"
    );
}

#[test]
fn an_empty_match_selects_nothing() {
    assert!(!provider_matches(&json!({}), &json!({})));
    assert!(!provider_matches(&Value::Null, &json!({"a": 1})));
}

// ---- matchIgnore and template match (§7.1) ----

#[test]
fn identical_templates_match_with_no_differences() {
    assert_eq!(
        template_match(&small(), &small(), &MatchIgnore::default()),
        Some(0)
    );
}

#[test]
fn a_difference_must_be_ignored_to_match() {
    let handle = json!({"spec": {"size": "small", "name": "a"}});
    let claim = json!({"spec": {"size": "small", "name": "b", "extra": 1}});
    assert_eq!(
        template_match(&handle, &claim, &MatchIgnore::default()),
        None
    );
    let ignore = MatchIgnore::compile(&["/spec/name".to_owned()]).expect("compiles");
    assert_eq!(
        template_match(&handle, &claim, &ignore),
        None,
        "/spec/extra is not ignored"
    );
    let ignore = MatchIgnore::compile(&["/spec/name".to_owned(), "/spec/extra".to_owned()])
        .expect("compiles");
    assert_eq!(template_match(&handle, &claim, &ignore), Some(2));
}

#[test]
fn keys_only_on_the_handle_do_not_matter() {
    let handle = json!({"spec": {"size": "small", "handleOnly": true}, "list": [1, 2]});
    let claim = json!({"spec": {"size": "small"}, "list": [1]});
    assert_eq!(
        template_match(&handle, &claim, &MatchIgnore::default()),
        Some(0)
    );
}

#[test]
fn ignore_patterns_are_fully_anchored() {
    let handle = json!({"spec": {"name": "a"}});
    let claim = json!({"spec": {"name": "b"}});
    for pattern in ["/spec/nam", "/spec", "spec/name", "/spec/name|/other"] {
        let ignore = MatchIgnore::compile(&[pattern.to_owned()]).expect("compiles");
        let expected = (pattern == "/spec/name|/other").then_some(1);
        assert_eq!(
            template_match(&handle, &claim, &ignore),
            expected,
            "{pattern}"
        );
    }
    // `a|b` anchors both branches: `/spec/name` must not be ignored by `/spec/n|/x`.
    let ignore = MatchIgnore::compile(&["/spec/n|/x".to_owned()]).expect("compiles");
    assert_eq!(template_match(&handle, &claim, &ignore), None);
}

#[test]
fn match_ignore_compile_errors_name_the_entry() {
    let err = MatchIgnore::compile(&["/ok".to_owned(), "/bad[".to_owned()]).expect_err("bad regex");
    assert!(
        matches!(&err, MatchError::InvalidIgnoreRegex { index: 1, pattern, .. } if pattern == "/bad[")
    );
    assert!(err.to_string().contains("matchIgnore[1]"), "{err}");
}

// ---- is_healthy (Δ§3.2) ----

#[test]
fn health_is_derived_from_status_resources() {
    let h = |status: Value| HandleBuilder::new("h").set("/status", status).build();
    assert_eq!(
        handle_is_healthy(&HandleBuilder::new("h").build()),
        Some(true),
        "no status"
    );
    assert_eq!(
        handle_is_healthy(&h(json!({"resources": [{}]}))),
        Some(true),
        "no health check"
    );
    assert_eq!(
        handle_is_healthy(&h(json!({"healthy": false, "resources": [{}]}))),
        Some(true),
        "status.healthy is not consulted"
    );
    assert_eq!(
        handle_is_healthy(&h(
            json!({"resources": [{"waitingFor": "ResourceClaim"}, {"healthy": true}]})
        )),
        None
    );
    assert_eq!(
        handle_is_healthy(&h(
            json!({"resources": [{"waitingFor": "ResourceClaim", "healthy": true}]})
        )),
        Some(true)
    );
    assert_eq!(
        handle_is_healthy(&h(
            json!({"resources": [{"waitingFor": "ResourceClaim"}, {"healthy": false}]})
        )),
        Some(false),
        "false wins over unknown"
    );
}

// ---- skip rules ----

#[test]
fn a_plain_unbound_handle_is_a_candidate() {
    assert_eq!(select(&[HandleBuilder::new("h").build()]), ["h"]);
}

#[test]
fn bound_and_deleting_handles_are_never_candidates() {
    let bound = HandleBuilder::new("bound")
        .set(
            "/spec/resourceClaim",
            json!({"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim", "name": "c", "namespace": "u"}),
        )
        .build();
    let deleting = HandleBuilder::new("deleting")
        .set("/metadata/deletionTimestamp", json!("2026-11-21T11:00:00Z"))
        .build();
    assert!(select(&[bound, deleting]).is_empty());
}

#[test]
fn unhealthy_handles_are_skipped() {
    let unhealthy = HandleBuilder::new("h")
        .set("/status", json!({"resources": [{"healthy": false}]}))
        .build();
    assert!(select(&[unhealthy]).is_empty());
}

#[test]
fn a_named_pool_excludes_handles_from_other_pools_and_from_no_pool() {
    let pool = |name: &str| json!({"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourcePool", "name": name, "namespace": "poolboy"});
    let handles = [
        HandleBuilder::new("in-a")
            .set("/spec/resourcePool", pool("a"))
            .build(),
        HandleBuilder::new("in-b")
            .set("/spec/resourcePool", pool("b"))
            .build(),
        HandleBuilder::new("no-pool").build(),
    ];
    let template = small();
    let claim = [resource(None, &template)];
    let chosen =
        bind_candidates(&claim, Some("a"), &handles, &ignores(&[]), now()).expect("selects");
    assert_eq!(names(&chosen), ["in-a"]);
    // Without a requested pool every handle qualifies.
    assert_eq!(select(&handles).len(), 3);
}

#[test]
fn handles_ending_within_120_seconds_are_skipped() {
    let ending = |name: &str, seconds: i64| {
        HandleBuilder::new(name)
            .set(
                "/spec/lifespan",
                json!({"end": rfc3339(now() + TimeDelta::seconds(seconds))}),
            )
            .build()
    };
    let handles = [
        ending("past", -10),
        ending("soon", 119),
        ending("edge", 120),
        ending("later", 3600),
        HandleBuilder::new("unparsable")
            .set("/spec/lifespan", json!({"end": "tomorrow"}))
            .build(),
        HandleBuilder::new("no-end")
            .set("/spec/lifespan", json!({"default": "1d"}))
            .build(),
    ];
    let mut chosen = select(&handles);
    chosen.sort();
    assert_eq!(chosen, ["edge", "later", "no-end"]);
}

#[test]
fn handles_with_more_resources_than_the_claim_are_skipped() {
    let two = HandleBuilder::new("two")
        .set(
            "/spec/resources/1",
            json!({"provider": {"apiVersion": "v", "kind": "k", "name": "p", "namespace": "n"}}),
        )
        .build();
    assert!(select(&[two]).is_empty());
}

#[test]
fn a_provider_difference_at_any_index_disqualifies() {
    let other = HandleBuilder::new("other")
        .set("/spec/resources/0/provider/name", json!("q"))
        .build();
    assert!(select(&[other]).is_empty());
}

#[test]
fn a_failed_template_check_disqualifies() {
    let big = HandleBuilder::new("big")
        .set(
            "/spec/resources/0/template",
            json!({"spec": {"size": "big"}}),
        )
        .build();
    assert!(select(&[big]).is_empty());
}

#[test]
fn a_missing_match_ignore_is_an_error_naming_the_provider() {
    let template = small();
    let claim = [resource(None, &template)];
    let handles = [HandleBuilder::new("h").build()];
    let err = bind_candidates(&claim, None, &handles, &HashMap::new(), now()).expect_err("missing");
    assert!(err.to_string().contains("\"p\""), "{err}");
}

#[test]
fn absent_templates_count_as_empty() {
    let bare = HandleBuilder::new("bare")
        .set("/spec/resources/0/template", Value::Null)
        .build();
    let claim = [DesiredResource {
        provider_name: "p",
        name: None,
        template: None,
    }];
    let chosen = bind_candidates(&claim, None, [&bare], &ignores(&[]), now()).expect("selects");
    assert_eq!(names(&chosen), ["bare"]);
}

// ---- preference order, one rule at a time ----

/// Asserts `better` is tried before `worse`, whatever order they come in.
fn assert_prefers(
    claim: &[DesiredResource<'_>],
    better: ResourceHandle,
    worse: ResourceHandle,
    ignore: &[&str],
) {
    let ignore = ignores(ignore);
    for handles in [[better.clone(), worse.clone()], [worse, better]] {
        let chosen = bind_candidates(claim, None, &handles, &ignore, now()).expect("selects");
        assert_eq!(names(&chosen), ["better", "worse"]);
    }
}

#[test]
fn fewer_extra_claim_resources_first() {
    let template = small();
    let claim = [resource(None, &template), resource(None, &template)];
    let second = json!({"provider": {"apiVersion": "v", "kind": "k", "name": "p", "namespace": "n"},
                        "template": {"spec": {"size": "small"}}});
    let better = HandleBuilder::new("better")
        .set("/spec/resources/1", second)
        .build();
    // The worse one wins every later rule.
    let worse = HandleBuilder::new("worse")
        .set("/spec/preferenceScore", json!(100))
        .set("/status/ready", json!(true))
        .set("/metadata/creationTimestamp", json!("2020-11-20T00:00:00Z"))
        .build();
    assert_prefers(&claim, better, worse, &[]);
}

#[test]
fn fewer_name_mismatches_second() {
    let template = small();
    let claim = [resource(Some("db"), &template)];
    let better = HandleBuilder::new("better")
        .set("/spec/resources/0/name", json!("db"))
        .build();
    let worse = HandleBuilder::new("worse")
        .set("/spec/resources/0/name", json!("other"))
        .set("/spec/preferenceScore", json!(100))
        .set("/metadata/creationTimestamp", json!("2020-11-20T00:00:00Z"))
        .build();
    assert_prefers(&claim, better, worse, &[]);
}

#[test]
fn fewer_template_differences_third() {
    let template = json!({"spec": {"size": "small", "label": "x"}});
    let claim = [resource(None, &template)];
    let better = HandleBuilder::new("better")
        .set(
            "/spec/resources/0/template",
            json!({"spec": {"size": "small", "label": "x"}}),
        )
        .build();
    let worse = HandleBuilder::new("worse")
        .set(
            "/spec/resources/0/template",
            json!({"spec": {"size": "small", "label": "y"}}),
        )
        .set("/status/ready", json!(true))
        .set("/spec/preferenceScore", json!(100))
        .build();
    assert_prefers(&claim, better, worse, &["/spec/label"]);
}

#[test]
fn healthy_before_unknown_health_fourth() {
    let template = small();
    let claim = [resource(None, &template)];
    let better = HandleBuilder::new("better").build();
    let worse = HandleBuilder::new("worse")
        .set(
            "/status/resources",
            json!([{"waitingFor": "ResourceClaim"}]),
        )
        .set("/status/ready", json!(true))
        .set("/spec/preferenceScore", json!(100))
        .build();
    assert_prefers(&claim, better, worse, &[]);
}

#[test]
fn ready_before_not_ready_fifth() {
    let template = small();
    let claim = [resource(None, &template)];
    let better = HandleBuilder::new("better")
        .set("/status/ready", json!(true))
        .set("/metadata/creationTimestamp", json!("2026-11-21T11:00:00Z"))
        .build();
    let worse = HandleBuilder::new("worse")
        .set("/status/ready", json!(false))
        .set("/spec/preferenceScore", json!(100))
        .set("/metadata/creationTimestamp", json!("2020-11-20T00:00:00Z"))
        .build();
    assert_prefers(&claim, better, worse, &[]);
}

#[test]
fn unknown_readiness_gets_no_preference_over_unready() {
    // B05: v1.12 preferred unknown readiness to known-unready; now age decides.
    let template = small();
    let claim = [resource(None, &template)];
    let better = HandleBuilder::new("better")
        .set("/status/ready", json!(false))
        .set("/metadata/creationTimestamp", json!("2026-11-21T09:00:00Z"))
        .build();
    let worse = HandleBuilder::new("worse")
        .set("/metadata/creationTimestamp", json!("2026-11-21T11:59:00Z"))
        .build();
    assert_prefers(&claim, better, worse, &[]);
}

#[test]
fn higher_preference_score_sixth() {
    let template = small();
    let claim = [resource(None, &template)];
    let better = HandleBuilder::new("better")
        .set("/spec/preferenceScore", json!(0.5))
        .set("/metadata/creationTimestamp", json!("2026-11-21T11:00:00Z"))
        .build();
    let worse = HandleBuilder::new("worse")
        .set("/metadata/creationTimestamp", json!("2020-11-20T00:00:00Z"))
        .build();
    assert_prefers(&claim, better, worse, &[]);
    // Absent counts as 0, so a negative score loses to it.
    let better = HandleBuilder::new("better").build();
    let worse = HandleBuilder::new("worse")
        .set("/spec/preferenceScore", json!(-1))
        .set("/metadata/creationTimestamp", json!("2020-11-20T00:00:00Z"))
        .build();
    assert_prefers(&claim, better, worse, &[]);
}

#[test]
fn older_creation_timestamp_seventh() {
    let template = small();
    let claim = [resource(None, &template)];
    let better = HandleBuilder::new("zzz-better")
        .set("/metadata/creationTimestamp", json!("2026-11-21T09:00:00Z"))
        .build();
    let worse = HandleBuilder::new("aaa-worse")
        .set("/metadata/creationTimestamp", json!("2026-11-21T10:00:00Z"))
        .build();
    let ignore = ignores(&[]);
    for handles in [
        [better.clone(), worse.clone()],
        [worse.clone(), better.clone()],
    ] {
        let chosen = bind_candidates(&claim, None, &handles, &ignore, now()).expect("selects");
        assert_eq!(names(&chosen), ["zzz-better", "aaa-worse"]);
    }
}

#[test]
fn name_breaks_remaining_ties() {
    let template = small();
    let claim = [resource(None, &template)];
    let better = HandleBuilder::new("better").build();
    let worse = HandleBuilder::new("worse").build();
    assert_prefers(&claim, better, worse, &[]);
}

#[test]
fn candidates_report_their_differences() {
    let template = json!({"spec": {"size": "small", "label": "x"}});
    let claim = [
        resource(Some("db"), &template),
        DesiredResource {
            provider_name: "p",
            name: None,
            template: None,
        },
    ];
    let handle = HandleBuilder::new("h")
        .set("/spec/resources/0/name", json!("other"))
        .set(
            "/status/resources",
            json!([{"waitingFor": "ResourceClaim"}]),
        )
        .build();
    let chosen = bind_candidates(&claim, None, [&handle], &ignores(&["/spec/label"]), now())
        .expect("selects");
    let [c] = chosen.as_slice() else {
        panic!("one candidate expected, got {}", chosen.len());
    };
    assert_eq!(
        (
            c.extra_claim_resources,
            c.name_mismatches,
            c.template_differences,
            c.healthy
        ),
        (1, 1, 1, None)
    );
}

#[test]
fn only_free_handles_of_the_operator_namespace_are_bind_candidates() {
    let domain = OperatorDomain::default();
    let candidate =
        |h: &ResourceHandle| is_bind_candidate(&h.metadata, &h.spec, &domain, "poolboy");
    let free = HandleBuilder::new("free").build();
    assert!(candidate(&free));
    let elsewhere = HandleBuilder::new("elsewhere")
        .set("/metadata/namespace", json!("user1"))
        .build();
    assert!(!candidate(&elsewhere));
    let bound = HandleBuilder::new("bound")
        .set(
            "/spec/resourceClaim",
            json!({"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
                   "name": "c", "namespace": "user1"}),
        )
        .build();
    assert!(!is_free(&bound.metadata, &bound.spec));
    assert!(!candidate(&bound));
    let deleting = HandleBuilder::new("deleting")
        .set("/metadata/deletionTimestamp", json!("2026-11-21T11:00:00Z"))
        .build();
    assert!(!is_free(&deleting.metadata, &deleting.spec));
    assert!(!candidate(&deleting));
    // A handle a claim let go of is free but never bound again.
    let released = HandleBuilder::new("released")
        .set(
            "/metadata/annotations",
            json!({"poolboy.gpte.redhat.com/released-from-claim": "user1/c"}),
        )
        .build();
    assert!(is_free(&released.metadata, &released.spec));
    assert!(is_released(&released.metadata, &domain));
    assert!(!candidate(&released));
}

#[test]
fn a_handle_that_does_not_fit_says_why_and_taken_ones_are_left_out() {
    let ignores: HashMap<String, MatchIgnore> = [("cm".to_owned(), MatchIgnore::default())].into();
    let template = json!({"data": {"color": "blue"}});
    let wanted = [DesiredResource {
        provider_name: "cm",
        name: None,
        template: Some(&template),
    }];
    let with_template = |name: &str, template: Value| {
        HandleBuilder::new(name)
            .set(
                "/spec/resources",
                json!([{"provider": {"apiVersion": "poolboy.gpte.redhat.com/v1",
                    "kind": "ResourceProvider", "name": "cm", "namespace": "poolboy"},
                    "template": template}]),
            )
            .build()
    };
    let red = with_template("red", json!({"data": {"color": "red"}}));
    let blue = with_template("blue", json!({"data": {"color": "blue"}}));
    let bound = HandleBuilder::new("bound")
        .set(
            "/spec/resourceClaim",
            json!({"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
                   "name": "c", "namespace": "user1"}),
        )
        .build();
    let handles = [red, blue, bound];
    let rejected = rejections(&wanted, None, &handles, &ignores, now()).expect("rejections");
    let reasons: Vec<(&str, String)> = rejected
        .iter()
        .map(|(h, r)| {
            (
                h.metadata.name.as_deref().unwrap_or_default(),
                r.to_string(),
            )
        })
        .collect();
    assert_eq!(
        reasons,
        [
            (
                "red",
                "resource 0's template differs at /data/color".to_owned()
            ),
            ("bound", "bound to another claim".to_owned()),
        ]
    );
    // The candidates are exactly the others.
    let candidates = bind_candidates(&wanted, None, &handles, &ignores, now()).expect("ranks");
    assert_eq!(candidates.len(), 1);
    assert_eq!(
        explain_no_fit(&rejected),
        "no unbound ResourceHandle fits: red: resource 0's template differs at /data/color"
    );
    assert_eq!(
        explain_no_fit(&rejected[1..]),
        "no unbound ResourceHandle exists"
    );
}

/// A ranking fits each distinct resource list once and reuses it for the handles that share
/// it (a pool's): the result is what each handle gets alone, with more distinct lists than
/// are kept, some fitting with ignored differences and some not, in any order.
#[test]
fn handles_that_share_resources_rank_as_each_would_alone() {
    let template = json!({"spec": {"size": "small", "label": "claim"}});
    let claim = [resource(None, &template)];
    let ignore = ignores(&["/spec/label"]);
    let sizes = ["small", "large"];
    let handles: Vec<ResourceHandle> = (0..40)
        .map(|index| {
            let label = format!("l{}", index % 11);
            let template = json!({"spec": {"size": sizes[index % 7 / 5], "label": label}});
            HandleBuilder::new(&format!("h{index:02}"))
                .set("/spec/resources/0/template", template)
                .build()
        })
        .collect();
    let each_alone = |handles: &[ResourceHandle]| -> Vec<(String, usize)> {
        let mut alone: Vec<(String, usize)> = handles
            .iter()
            .flat_map(|h| bind_candidates(&claim, None, [h], &ignore, now()).expect("selects"))
            .map(|c| (c.handle.name_any(), c.template_differences))
            .collect();
        alone.sort();
        alone
    };
    let together = |handles: &[ResourceHandle]| -> Vec<(String, usize)> {
        let mut together: Vec<(String, usize)> =
            bind_candidates(&claim, None, handles, &ignore, now())
                .expect("selects")
                .iter()
                .map(|c| (c.handle.name_any(), c.template_differences))
                .collect();
        together.sort();
        together
    };
    let expected = each_alone(&handles);
    assert!(!expected.is_empty() && expected.len() < handles.len());
    assert_eq!(together(&handles), expected);
    let mut reversed = handles.clone();
    reversed.reverse();
    assert_eq!(together(&reversed), expected);
    let rejected = rejections(&claim, None, &handles, &ignore, now()).expect("assesses");
    assert_eq!(rejected.len() + expected.len(), handles.len());
}

//! The chart's Grafana dashboard and PrometheusRule, rendered with `helm template`: the
//! dashboard is valid JSON, every alert links to a section of docs/operations.md, and every
//! metric a panel or a rule queries is one a running broker exports (its `/metrics`, scraped).

mod support;

use std::collections::BTreeSet;

use regex::Regex;
use serde_json::{Value, json};
use support::config::{create_config_provider, template};
use support::fixtures::create_pool;
use support::objects;
use support::operator::TestOperator;
use support::tools::{helm_template, repo_dir};
use support::{TIMEOUT, TestEnv, eventually};

const RUNBOOKS: &str = "https://example.org/poolboy";

/// Renders the chart's `template` with `sets` (helm `--set`): its one document, as JSON.
fn render(template: &str, sets: &[&str]) -> Value {
    let yaml = helm_template("observed", &[template], sets);
    serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("bad YAML ({e}):\n{yaml}"))
}

/// Every PromQL expression of the dashboard: its panels' targets (rows' too) and its
/// variables' queries.
fn dashboard_queries(dashboard: &Value) -> Vec<String> {
    fn panels(list: &Value, found: &mut Vec<String>) {
        for panel in list.as_array().into_iter().flatten() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                found.extend(target["expr"].as_str().map(str::to_owned));
            }
            // A row holds panels of its own.
            panels(&panel["panels"], found);
        }
    }
    let mut found = Vec::new();
    panels(&dashboard["panels"], &mut found);
    let variables = dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten();
    for variable in variables.filter(|v| v["type"] == "query") {
        found.extend(variable["query"]["query"].as_str().map(str::to_owned));
    }
    found
}

/// The metric names an expression reads: the broker's own and the process figures.
fn metric_names(expression: &str) -> BTreeSet<String> {
    let name = Regex::new(r"\b(poolboy_[a-z_]+|process_[a-z_]+)\b").expect("a regex");
    name.captures_iter(expression)
        .map(|c| c[1].to_owned())
        .collect()
}

/// The metric families a scrape declares (`# TYPE <name> <type>`), samples or not.
fn families(scrape: &str) -> BTreeSet<String> {
    scrape
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Whether `name`, as a query reads it, is a series of one of `families`: the family itself,
/// or a counter's `_total`, a histogram's `_bucket`, `_sum` or `_count`.
fn exported(name: &str, families: &BTreeSet<String>) -> bool {
    families.contains(name)
        || ["_total", "_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|suffix| name.strip_suffix(suffix))
            .any(|family| families.contains(family))
}

/// The anchors of docs/operations.md's sections, as GitHub makes them from the headings.
fn runbook_anchors() -> BTreeSet<String> {
    let text =
        std::fs::read_to_string(repo_dir().join("docs/operations.md")).expect("the runbooks");
    text.lines()
        .filter_map(|line| line.strip_prefix("## "))
        .map(|heading| heading.trim().to_lowercase().replace(' ', "-"))
        .collect()
}

#[tokio::test]
async fn the_dashboard_and_the_alerts_query_what_the_broker_exports() {
    let config_map = render(
        "grafana-dashboard.yaml",
        &["grafana.dashboard.enabled=true"],
    );
    assert_eq!(config_map["metadata"]["labels"]["grafana_dashboard"], "1");
    let json = config_map["data"]["poolboy.json"]
        .as_str()
        .expect("the dashboard");
    let dashboard: Value = serde_json::from_str(json).expect("the dashboard is JSON");
    let mut queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 20, "{queries:#?}");

    let base = format!("metrics.prometheusRule.runbookBaseUrl={RUNBOOKS}");
    let rule = render(
        "prometheusrule.yaml",
        &["metrics.prometheusRule.enabled=true", &base],
    );
    let rules: Vec<&Value> = rule["spec"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["rules"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(rules.len(), 7, "{rule:#}");
    let anchors = runbook_anchors();
    for rule in &rules {
        let alert = rule["alert"].as_str().expect("an alert");
        let runbook = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_default();
        let anchor = runbook
            .strip_prefix(&format!("{RUNBOOKS}/docs/operations.md#"))
            .unwrap_or_else(|| panic!("{alert}: runbook {runbook}"));
        assert_eq!(anchor, alert.to_lowercase(), "{alert}");
        assert!(anchors.contains(anchor), "{alert}: no section {anchor}");
        assert!(rule["labels"]["severity"].is_string(), "{alert}");
        queries.push(rule["expr"].as_str().expect("an expression").to_owned());
    }

    // A pool: its gauges are series of its own.
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    create_config_provider(&env, false).await;
    let resources = objects::resources(&ns, &[("config", "config", template(json!({})))]);
    create_pool(
        &env,
        "observed",
        json!({"minAvailable": 1, "resources": resources}),
    )
    .await;
    let address = support::http::free_address();
    let operator = TestOperator::start_with(env.kube_config(), &ns, Some(address), "observed");
    let scrape = eventually("the broker running, the pool counted", TIMEOUT, || async {
        let (_, text) = support::http::get(address, "/metrics").await;
        let counted = text.lines().any(|line| line == "poolboy_leader 1")
            && text.contains("poolboy_resource_pool_available{");
        counted.then_some(text)
    })
    .await;
    let families = families(&scrape);
    let queried: BTreeSet<String> = queries.iter().flat_map(|q| metric_names(q)).collect();
    assert!(queried.len() >= 20, "{queried:?}");
    let missing: Vec<&String> = queried
        .iter()
        .filter(|name| !exported(name, &families))
        .collect();
    assert!(missing.is_empty(), "not exported: {missing:?}\n{scrape}");
    // The requests the broker made to start are counted by verb.
    for verb in ["list", "watch"] {
        let line = format!("poolboy_api_requests_total{{verb=\"{verb}\"}} ");
        assert!(scrape.contains(&line), "no {verb} counted:\n{scrape}");
    }
    env.teardown([operator]).await;
}

//! How the benchmarks read Prometheus text (`benches/support/metrics.rs`): the requests the
//! API server counted (`benches/support/requests.rs`) and a broker's reconciles, from lines as
//! kube-apiserver and the broker write them.

#[path = "../benches/support/metrics.rs"]
mod metrics;
#[allow(dead_code)] // `read` asks a live API server
#[path = "../benches/support/requests.rs"]
mod requests;

use metrics::{Passes, label, samples};
use requests::Requests;

const APISERVER: &str = r#"# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="poolboy.gpte.redhat.com",resource="resourceclaims",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="409",component="apiserver",dry_run="",group="poolboy.gpte.redhat.com",resource="resourceclaims",scope="resource",subresource="status",verb="PATCH",version="v1"} 1
apiserver_request_total_other{verb="GET"} 9
"#;

const BROKER: &str = r#"poolboy_reconcile_duration_seconds_count{controller="ResourceClaim",outcome="ok"} 3
poolboy_reconcile_duration_seconds_count{controller="ResourceClaim",outcome="error"} 1
poolboy_reconcile_duration_seconds_count{controller="ResourcePool",outcome="ok"} 2
poolboy_reconcile_duration_seconds_sum{controller="ResourcePool",outcome="ok"} 0.5
"#;

#[test]
fn a_label_is_read_by_its_whole_name() {
    let labels = r#"{resource="configmaps",subresource="status",verb="POST"}"#;
    assert_eq!(label(labels, "resource"), "configmaps");
    assert_eq!(label(labels, "subresource"), "status");
    assert_eq!(label(labels, "verb"), "POST");
    assert_eq!(label(labels, "code"), "");
}

#[test]
fn samples_are_those_of_the_metric_named_and_no_longer_name() {
    let values: Vec<f64> = samples(APISERVER, "apiserver_request_total")
        .map(|(_, value)| value)
        .collect();
    assert_eq!(values, [4.0, 2.0, 1.0]);
}

#[test]
fn requests_are_summed_by_verb_resource_and_subresource() {
    let requests = Requests::parse(APISERVER);
    assert_eq!(requests.total(), 7.0);
    assert_eq!(
        requests.per(1.0),
        "PATCH resourceclaims/status 3.00, POST configmaps 4.00"
    );
}

#[test]
fn passes_are_summed_by_controller() {
    let passes = Passes::of(BROKER);
    assert_eq!(passes.to_string(), "Claim 4.0, Pool 2.0");
    let twice = passes.plus(&passes);
    assert_eq!(twice.since(&passes, 2.0).to_string(), "Claim 2.0, Pool 1.0");
}

//! What the API server itself counted: `apiserver_request_total` from its `/metrics`, summed
//! by verb and resource, so a benchmark can print the requests one claim cost.

use std::collections::BTreeMap;

use crate::metrics::{label, samples};

/// Requests served so far, by "VERB resource[/subresource]".
#[derive(Clone, Debug, Default)]
pub struct Requests(BTreeMap<String, f64>);

impl Requests {
    /// The API server's counters now.
    pub async fn read(client: &kube::Client) -> Self {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .expect("a GET request");
        let text = client
            .request_text(request)
            .await
            .expect("the API server's /metrics");
        Self::parse(&text)
    }

    /// The counters of `text`, the API server's `/metrics`.
    pub fn parse(text: &str) -> Self {
        let mut counts = BTreeMap::new();
        for (labels, value) in samples(text, "apiserver_request_total") {
            let mut key = format!("{} {}", label(labels, "verb"), label(labels, "resource"));
            let subresource = label(labels, "subresource");
            if !subresource.is_empty() {
                key = format!("{key}/{subresource}");
            }
            *counts.entry(key).or_insert(0.0) += value;
        }
        Self(counts)
    }

    /// What was counted between `earlier` and `self`, without the requests that did not change.
    pub fn since(&self, earlier: &Self) -> Self {
        Self(
            self.0
                .iter()
                .map(|(key, now)| {
                    (
                        key.clone(),
                        now - earlier.0.get(key).copied().unwrap_or(0.0),
                    )
                })
                .filter(|(_, delta)| *delta > 0.0)
                .collect(),
        )
    }

    /// All requests counted, every verb and resource.
    pub fn total(&self) -> f64 {
        self.0.values().sum()
    }

    /// "VERB resource: n.n" per key, each divided by `per`, on one line; keys that round to
    /// 0.00 (the control plane's own watches, restarted meanwhile) are left out.
    pub fn per(&self, per: f64) -> String {
        self.0
            .iter()
            .map(|(key, count)| (key, count / per))
            .filter(|(_, share)| *share >= 0.005)
            .map(|(key, share)| format!("{key} {share:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

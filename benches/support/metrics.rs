//! Prometheus text as `/metrics` serves it: the samples of a metric, their labels, and what a
//! broker counted of its own work (its reconciles by kind).

use std::collections::BTreeMap;

/// Each sample of `metric` in `text` (Prometheus text format): its labels ("" or "{...}") and
/// its value.
pub fn samples<'a>(text: &'a str, metric: &'a str) -> impl Iterator<Item = (&'a str, f64)> {
    text.lines().filter_map(move |line| {
        let rest = line.strip_prefix(metric)?;
        let (labels, value) = rest.rsplit_once(' ')?;
        if !(labels.is_empty() || labels.starts_with('{')) {
            return None;
        }
        Some((labels, value.parse().ok()?))
    })
}

/// The value of label `name` in `labels` (`{a="x",b="y"}`), empty when absent.
pub fn label<'a>(labels: &'a str, name: &str) -> &'a str {
    let labels = labels.trim_start_matches('{').trim_end_matches('}');
    labels
        .split("\",")
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\""))
        .map_or("", |value| value.trim_end_matches('"'))
}

/// Reconciles by kind (ResourceClaim, ResourceHandle, ResourcePool, ...).
#[derive(Clone, Debug, Default)]
pub struct Passes(BTreeMap<String, f64>);

impl Passes {
    /// The reconciles a broker's `/metrics` text counts.
    pub fn of(metrics: &str) -> Self {
        let mut by_kind = BTreeMap::new();
        for (labels, count) in samples(metrics, "poolboy_reconcile_duration_seconds_count") {
            let kind = match label(labels, "controller") {
                "" => "?",
                kind => kind,
            };
            *by_kind.entry(kind.to_owned()).or_insert(0.0) += count;
        }
        Self(by_kind)
    }

    /// Both counts together: the passes of two processes.
    pub fn plus(&self, other: &Self) -> Self {
        let mut sum = self.0.clone();
        for (kind, count) in &other.0 {
            *sum.entry(kind.clone()).or_insert(0.0) += count;
        }
        Self(sum)
    }

    /// What `self` counted since `earlier`, divided by `per`.
    pub fn since(&self, earlier: &Self, per: f64) -> Self {
        Self(
            self.0
                .iter()
                .map(|(kind, now)| {
                    let before = earlier.0.get(kind).copied().unwrap_or(0.0);
                    (kind.clone(), (now - before) / per)
                })
                .filter(|(_, each)| *each > 0.0)
                .collect(),
        )
    }
}

impl std::fmt::Display for Passes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<_> = self
            .0
            .iter()
            .map(|(kind, each)| format!("{} {each:.1}", kind.trim_start_matches("Resource")))
            .collect();
        write!(f, "{}", kinds.join(", "))
    }
}

//! The operator domain (API group) and every key derived from it, exactly as Poolboy spells
//! them (§3, §12.3, Δ§2.7), so that objects can move between the two implementations.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The operator domain, `D` in the spec; default `poolboy.gpte.redhat.com`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OperatorDomain(String);

impl Default for OperatorDomain {
    fn default() -> Self {
        Self(super::DEFAULT_GROUP.to_owned())
    }
}

impl fmt::Display for OperatorDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl OperatorDomain {
    pub fn new(domain: impl Into<String>) -> Self {
        Self(domain.into())
    }

    /// The API group of every kind.
    pub fn group(&self) -> &str {
        &self.0
    }

    /// `D/v1`, the apiVersion written in references.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.0, super::VERSION)
    }

    /// `D/<name>`: the form of every Poolboy label, annotation and finalizer key.
    pub fn key(&self, name: &str) -> String {
        format!("{}/{}", self.0, name)
    }

    /// The finalizer of the all-in-one operator: the bare domain (§2.2, Δ§4.7).
    pub fn finalizer(&self) -> String {
        self.0.clone()
    }

    /// Whether `finalizer` is one that some Poolboy mode or version puts on claims, handles
    /// and pools: `D`, `D/handler`, `D/handler-<n>` (v1.14.0–10) and `D/resource-handler-<n>`.
    /// All of them are removed on finalize (Δ§4.7, quirks Q1, Q2, Q15).
    pub fn is_poolboy_finalizer(&self, finalizer: &str) -> bool {
        if finalizer == self.0 {
            return true;
        }
        let Some(rest) = finalizer
            .strip_prefix(self.0.as_str())
            .and_then(|r| r.strip_prefix('/'))
        else {
            return false;
        };
        let numbered = |prefix: &str| {
            rest.strip_prefix(prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        rest == "handler" || numbered("handler-") || numbered("resource-handler-")
    }

    /// Whether an object of `metadata` carries a [Poolboy finalizer](Self::is_poolboy_finalizer):
    /// then it has its one (Δ§4.7), and the operator adds none beside it.
    pub fn carries_poolboy_finalizer(&self, metadata: &ObjectMeta) -> bool {
        let finalizers = metadata.finalizers.as_deref().unwrap_or_default();
        finalizers.iter().any(|f| self.is_poolboy_finalizer(f))
    }

    /// The label that pauses all management of a claim or handle (§7.6).
    pub fn ignore_label(&self) -> String {
        self.key("ignore")
    }

    /// Whether an object of `metadata` is left alone (§7.6): labelled [`Self::ignore_label`],
    /// it is neither managed, validated, counted by its pool nor finalized.
    pub fn ignores(&self, metadata: &ObjectMeta) -> bool {
        metadata
            .labels
            .as_ref()
            .is_some_and(|labels| self.ignores_labelled(labels))
    }

    /// [`Self::ignores`] for an object of which only the labels are at hand.
    pub fn ignores_labelled(&self, labels: &BTreeMap<String, String>) -> bool {
        labels.contains_key(&self.ignore_label())
    }
    pub fn resource_claim_name(&self) -> String {
        self.key("resource-claim-name")
    }
    pub fn resource_claim_namespace(&self) -> String {
        self.key("resource-claim-namespace")
    }
    pub fn resource_pool_name(&self) -> String {
        self.key("resource-pool-name")
    }
    pub fn resource_pool_namespace(&self) -> String {
        self.key("resource-pool-namespace")
    }
    /// The version of the pool a handle was made from (not in Poolboy).
    pub fn resource_pool_version(&self) -> String {
        self.key("resource-pool-version")
    }
    pub fn resource_pool_scaling_name(&self) -> String {
        self.key("resource-pool-scaling-name")
    }
    pub fn resource_handler_idx(&self) -> String {
        self.key("resource-handler-idx")
    }
    pub fn resource_claim_init_timestamp(&self) -> String {
        self.key("resource-claim-init-timestamp")
    }
    pub fn resource_provider_name(&self) -> String {
        self.key("resource-provider-name")
    }
    pub fn resource_provider_namespace(&self) -> String {
        self.key("resource-provider-namespace")
    }
    pub fn resource_handle_name(&self) -> String {
        self.key("resource-handle-name")
    }
    pub fn resource_handle_namespace(&self) -> String {
        self.key("resource-handle-namespace")
    }
    pub fn resource_handle_uid(&self) -> String {
        self.key("resource-handle-uid")
    }
    pub fn resource_handle_deleted(&self) -> String {
        self.key("resource-handle-deleted")
    }
    /// Marks a handle a claim let go of (not in Poolboy): never bound again, deleted.
    pub fn released_from_claim(&self) -> String {
        self.key("released-from-claim")
    }
    pub fn resource_index(&self) -> String {
        self.key("resource-index")
    }
    pub fn resource_requester_user(&self) -> String {
        self.key("resource-requester-user")
    }
    pub fn resource_requester_email(&self) -> String {
        self.key("resource-requester-email")
    }
    pub fn resource_requester_name(&self) -> String {
        self.key("resource-requester-name")
    }
    pub fn resource_requester_preferred_username(&self) -> String {
        self.key("resource-requester-preferred-username")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_derive_from_the_domain() {
        let d = OperatorDomain::new("poolboy.dev.local");
        assert_eq!(d.ignore_label(), "poolboy.dev.local/ignore");
        assert_eq!(d.api_version(), "poolboy.dev.local/v1");
        assert_eq!(d.finalizer(), "poolboy.dev.local");
        assert_eq!(
            OperatorDomain::default().resource_handle_deleted(),
            "poolboy.gpte.redhat.com/resource-handle-deleted"
        );
    }

    #[test]
    fn only_the_ignore_label_of_the_domain_leaves_an_object_alone() {
        let d = OperatorDomain::new("poolboy.dev.local");
        let labelled = |key: &str| ObjectMeta {
            labels: Some(BTreeMap::from([(key.to_owned(), String::new())])),
            ..ObjectMeta::default()
        };
        assert!(d.ignores(&labelled("poolboy.dev.local/ignore")));
        assert!(!d.ignores(&labelled("poolboy.gpte.redhat.com/ignore")));
        assert!(!d.ignores(&labelled("ignore")));
        assert!(!d.ignores(&ObjectMeta::default()));
    }

    #[test]
    fn every_poolboy_finalizer_is_recognised() {
        let d = OperatorDomain::default();
        for f in [
            "poolboy.gpte.redhat.com",
            "poolboy.gpte.redhat.com/handler",
            "poolboy.gpte.redhat.com/handler-3",
            "poolboy.gpte.redhat.com/resource-handler-12",
        ] {
            assert!(d.is_poolboy_finalizer(f), "{f}");
        }
        for f in [
            "poolboy.gpte.redhat.com/handler-",
            "poolboy.gpte.redhat.com/handler-x",
            "poolboy.gpte.redhat.com/watch-a",
            "kubernetes",
            "poolboy.gpte.redhat.comx",
        ] {
            assert!(!d.is_poolboy_finalizer(f), "{f}");
        }
    }

    /// Any Poolboy mode's finalizer is the object's one Poolboy finalizer: none is added
    /// beside `D/handler` (Δ§4.7).
    #[test]
    fn a_finalizer_of_any_poolboy_mode_counts_as_the_one() {
        let d = OperatorDomain::default();
        let with = |finalizers: &[&str]| ObjectMeta {
            finalizers: Some(finalizers.iter().map(|f| (*f).to_owned()).collect()),
            ..ObjectMeta::default()
        };
        for ours in ["poolboy.gpte.redhat.com", "poolboy.gpte.redhat.com/handler"] {
            assert!(d.carries_poolboy_finalizer(&with(&["other", ours])));
        }
        assert!(!d.carries_poolboy_finalizer(&with(&["other"])));
        assert!(!d.carries_poolboy_finalizer(&ObjectMeta::default()));
    }
}

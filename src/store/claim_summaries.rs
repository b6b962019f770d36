//! What the broker reads across all claims, kept from the claim watch event by event: the
//! claim store holds claims packed (`store::packed`), and a provider change (which claims
//! it concerns) or a provider's `maxClaimsPerNamespace` (which claims of a namespace hold a
//! handle through it) would otherwise decode every claim.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kube::runtime::watcher;

use crate::api::kinds::ClaimObject;
use crate::core::claim::limits::held_through;
use crate::core::claim::status::invalid_message;
use crate::core::provider::users::ClaimProviders;
use crate::metrics::ClaimCounts;
use crate::store::shared_watch::{FollowedIndex, Relisting, SharedWatch};

/// A claim's (namespace, name).
type ClaimKey = (String, String);

/// Where a claim stands, as its status says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClaimState {
    Bound,
    /// Valid, without a handle yet.
    Waiting,
    /// Its `Valid` condition is False.
    Invalid,
}

impl ClaimState {
    fn of(claim: &ClaimObject) -> Self {
        let status = claim.status.as_ref();
        if invalid_message(status).is_some() {
            Self::Invalid
        } else if status.is_some_and(|s| s.resource_handle.is_some()) {
            Self::Bound
        } else {
            Self::Waiting
        }
    }
}

/// Shared by the claim watch (which it follows) and the controllers. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct ClaimSummaries {
    inner: Arc<Mutex<Summaries>>,
}

#[derive(Debug, Default)]
struct Summaries {
    /// Namespace → claim name → what is known of it.
    namespaces: HashMap<String, HashMap<String, Summary>>,
    relisting: Relisting<ClaimKey, Summary>,
}

#[derive(Debug)]
struct Summary {
    providers: ClaimProviders,
    state: ClaimState,
    deleting: bool,
    /// The providers whose limits it counts against ([`held_through`]).
    held_through: Box<[String]>,
    /// What a handle's pass reads of it ([`looks_to_handles`]).
    looks: Looks,
}

impl ClaimSummaries {
    /// The summaries of the claims `claims` watches; they follow the watch, and tell
    /// `concerns_handles` of each claim whose change its handles must hear of (created,
    /// deleted, re-listed, or changed in what a handle reads of it: [`looks_to_handles`]), and
    /// whether only what templates read of it changed (its spec, status and deletion).
    pub(crate) fn following(
        claims: &mut SharedWatch<ClaimObject>,
        concerns_handles: impl Fn(&ClaimObject, bool) + Send + Sync + 'static,
    ) -> Self {
        let summaries = Self::default();
        let follower = summaries.inner.clone();
        claims.follow(move |event| {
            if let Some((claim, only_rendered)) = lock(&follower).apply_telling(event) {
                concerns_handles(claim, only_rendered);
            }
        });
        summaries
    }

    /// The claims a change of provider `name` concerns, as (namespace, name).
    pub(crate) fn concerned_by(&self, provider: &str) -> Vec<ClaimKey> {
        let summaries = self.lock();
        let claims = summaries.namespaces.iter().flat_map(|(namespace, claims)| {
            claims
                .iter()
                .filter(|(_, summary)| summary.providers.concern(provider))
                .map(|(name, _)| (namespace.clone(), name.clone()))
        });
        claims.collect()
    }

    /// Of the claims of `namespace`: those that hold a handle through `provider` and are not
    /// being deleted, and all those not being deleted.
    pub(crate) fn holding(
        &self,
        namespace: &str,
        provider: &str,
    ) -> (BTreeSet<String>, BTreeSet<String>) {
        let summaries = self.lock();
        let claims = summaries.namespaces.get(namespace).into_iter().flatten();
        let alive: Vec<(&String, &Summary)> =
            claims.filter(|(_, summary)| !summary.deleting).collect();
        let holding = alive
            .iter()
            .filter(|(_, summary)| summary.held_through.iter().any(|p| p == provider))
            .map(|(name, _)| (*name).clone())
            .collect();
        let alive = alive.into_iter().map(|(name, _)| name.clone()).collect();
        (holding, alive)
    }

    /// How many claims are in each state.
    pub(crate) fn counts(&self) -> ClaimCounts {
        let summaries = self.lock();
        let mut counts = ClaimCounts::default();
        for summary in summaries.namespaces.values().flat_map(HashMap::values) {
            match summary.state {
                ClaimState::Bound => counts.bound += 1,
                ClaimState::Waiting => counts.waiting += 1,
                ClaimState::Invalid => counts.invalid += 1,
            }
        }
        counts
    }

    fn lock(&self) -> MutexGuard<'_, Summaries> {
        lock(&self.inner)
    }
}

impl Summaries {
    /// Applies `event`; its claim when its handles must hear of it, and whether only what
    /// their templates read of it changed.
    fn apply_telling<'e>(
        &mut self,
        event: &'e watcher::Event<ClaimObject>,
    ) -> Option<(&'e ClaimObject, bool)> {
        let looked = match event {
            watcher::Event::Apply(claim) => Self::key(claim).and_then(|(namespace, name)| {
                Some(self.namespaces.get(&namespace)?.get(&name)?.looks)
            }),
            _ => None,
        };
        self.apply(event);
        match event {
            watcher::Event::Apply(claim) => {
                let looks = looks_to_handles(claim);
                match looked {
                    Some(looked) if looked == looks => None,
                    Some(looked) => Some((claim, looked.object == looks.object)),
                    None => Some((claim, false)),
                }
            }
            watcher::Event::InitApply(claim) | watcher::Event::Delete(claim) => {
                Some((claim, false))
            }
            watcher::Event::Init | watcher::Event::InitDone => None,
        }
    }
}

/// Digests of what a handle's pass reads of its claim (the templates see it whole): all of
/// it but what the claim's status copies from the handle (its resources' states, readiness and
/// health, the summary, the conditions, the wait estimate), which moves on with every change
/// of the handle's own status and is news to no handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Looks {
    /// Its uid, labels and annotations, which every pass of its handles reads.
    object: u64,
    /// What only templates and a provider's parameter values read: its spec (the generation
    /// stands for it), its status, and its deletion. An edit of the spec reaches a handle
    /// through the claim's own pass, which writes it into the handle (a change of the handle);
    /// a claim being deleted deletes the handles bound to it from its own finalizer (§7.3), and
    /// its removal wakes them all.
    rendered: u64,
}

fn looks_to_handles(claim: &ClaimObject) -> Looks {
    let meta = &claim.metadata;
    let status = claim.status.as_ref();
    let resources: Option<Vec<_>> = status.and_then(|s| s.resources.as_ref()).map(|resources| {
        resources
            .iter()
            .map(|r| (&r.name, &r.provider, &r.reference, &r.validation_error))
            .collect()
    });
    let object = (&meta.uid, &meta.labels, &meta.annotations);
    let rendered = (
        status.map(|s| (&s.approval, &s.lifespan, &s.provider, &s.resource_handle)),
        resources,
        (meta.generation, &meta.deletion_timestamp, &meta.finalizers),
    );
    Looks {
        object: super::digest(&object),
        rendered: super::digest(&rendered),
    }
}

fn lock(summaries: &Mutex<Summaries>) -> MutexGuard<'_, Summaries> {
    summaries.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FollowedIndex<ClaimObject> for Summaries {
    type Key = ClaimKey;
    type Entry = Summary;

    fn key(claim: &ClaimObject) -> Option<ClaimKey> {
        Some((
            claim.metadata.namespace.clone()?,
            claim.metadata.name.clone()?,
        ))
    }

    fn entry(claim: &ClaimObject) -> Option<Summary> {
        let status = claim.status.as_ref();
        Some(Summary {
            providers: ClaimProviders::of(&claim.spec, status),
            state: ClaimState::of(claim),
            deleting: claim.metadata.deletion_timestamp.is_some(),
            held_through: held_through(&claim.metadata, status).into(),
            looks: looks_to_handles(claim),
        })
    }

    fn record(&mut self, (namespace, name): ClaimKey, summary: Summary) {
        self.namespaces
            .entry(namespace)
            .or_default()
            .insert(name, summary);
    }

    fn forget(&mut self, (namespace, name): &ClaimKey) {
        if let Some(claims) = self.namespaces.get_mut(namespace) {
            claims.remove(name);
            if claims.is_empty() {
                self.namespaces.remove(namespace);
            }
        }
    }

    fn clear(&mut self) {
        self.namespaces.clear();
    }

    fn relisting(&mut self) -> &mut Relisting<ClaimKey, Summary> {
        &mut self.relisting
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;

    fn claim(namespace: &str, name: &str, provider: &str, bound: bool) -> ClaimObject {
        let mut value = json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"provider": {"name": provider}},
            "status": {"provider": {"name": provider}},
        });
        if bound {
            value["status"]["resourceHandle"] = json!({"apiVersion": "poolboy.gpte.redhat.com/v1",
                "kind": "ResourceHandle", "name": "guid-a", "namespace": "poolboy"});
        }
        serde_json::from_value(value).expect("a claim")
    }

    fn names(set: &BTreeSet<String>) -> Vec<&str> {
        set.iter().map(String::as_str).collect()
    }

    #[test]
    fn the_summaries_follow_each_claim_of_each_namespace() {
        let summaries = ClaimSummaries::default();
        let apply = |event: Event<ClaimObject>| summaries.lock().apply(&event);
        apply(Event::Apply(claim("user", "a", "lab", true)));
        apply(Event::Apply(claim("user", "b", "lab", false)));
        apply(Event::Apply(claim("other", "c", "db", true)));
        let (holding, alive) = summaries.holding("user", "lab");
        assert_eq!(
            (names(&holding), names(&alive)),
            (vec!["a"], vec!["a", "b"])
        );
        let mut concerned = summaries.concerned_by("db");
        concerned.sort();
        // b is unbound: any provider may be the one it waits for.
        assert_eq!(
            concerned,
            [("other".into(), "c".into()), ("user".into(), "b".into())]
        );
        let mut going = claim("user", "a", "lab", true);
        going.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        apply(Event::Apply(going));
        apply(Event::Delete(claim("user", "b", "lab", false)));
        let (holding, alive) = summaries.holding("user", "lab");
        assert!(holding.is_empty() && alive.is_empty());
        assert_eq!(names(&summaries.holding("other", "db").0), ["c"]);
        apply(Event::Delete(claim("other", "c", "db", true)));
        assert!(
            !summaries.lock().namespaces.contains_key("other"),
            "an empty namespace is forgotten"
        );
    }

    /// Each claim counts in one state, and a deleted one in none.
    #[test]
    fn claims_are_counted_by_state_until_deleted() {
        let summaries = ClaimSummaries::default();
        let apply = |event: Event<ClaimObject>| summaries.lock().apply(&event);
        apply(Event::Apply(claim("user", "a", "lab", true)));
        apply(Event::Apply(claim("user", "b", "lab", false)));
        let mut invalid = claim("other", "c", "db", false);
        invalid.status = serde_json::from_value(json!({"conditions": [{
            "type": "Valid", "status": "False", "reason": "InvalidClaim", "message": "no",
            "lastTransitionTime": "2026-11-27T10:00:00Z"}]}))
        .ok();
        apply(Event::Apply(invalid));
        let counts = |bound, waiting, invalid| ClaimCounts {
            bound,
            waiting,
            invalid,
        };
        assert_eq!(summaries.counts(), counts(1, 1, 1));
        apply(Event::Apply(claim("user", "b", "lab", true)));
        assert_eq!(summaries.counts(), counts(2, 0, 1));
        apply(Event::Delete(claim("user", "a", "lab", true)));
        apply(Event::Delete(claim("other", "c", "db", false)));
        assert_eq!(summaries.counts(), counts(1, 0, 0));
    }

    /// A claim's change reaches its handles unless it only moved what the claim's status
    /// copies from the handle, and says when only what templates read of it changed (its
    /// spec, status, deletion); a new, removed or re-listed claim always reaches them, as a
    /// change of more than that.
    #[test]
    fn handles_hear_of_what_they_read_of_their_claim() {
        let mut summaries = Summaries::default();
        let mut tell = |claim: &ClaimObject| {
            summaries
                .apply_telling(&Event::Apply(claim.clone()))
                .map(|(_, only_rendered)| only_rendered)
        };
        let mut claim = claim("user", "a", "lab", true);
        let entry = serde_json::from_value(json!({"name": "lab"})).expect("a resource status");
        claim.status.get_or_insert_default().resources = Some(vec![entry]);
        assert_eq!(tell(&claim), Some(false), "a new claim");
        let status = claim.status.get_or_insert_default();
        status.ready = Some(true);
        status.summary = Some(json!({"state": "started"}));
        let resource = &mut status.resources.get_or_insert_default()[0];
        resource.state = Some(json!({"metadata": {"resourceVersion": "7"}}));
        resource.ready = Some(true);
        assert_eq!(tell(&claim), None, "what the status copies from the handle");
        let resource = &mut claim
            .status
            .get_or_insert_default()
            .resources
            .get_or_insert_default()[0];
        resource.state = Some(json!({"metadata": {"resourceVersion": "8"}}));
        assert_eq!(tell(&claim), None, "a resource's new state");
        claim.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
        assert_eq!(tell(&claim), Some(false), "a label");
        claim.metadata.generation = Some(2);
        assert_eq!(
            tell(&claim),
            Some(true),
            "an edit of the spec: its pass writes it into the handle"
        );
        claim.status.get_or_insert_default().resource_handle = None;
        assert_eq!(
            tell(&claim),
            Some(true),
            "the handle reference: only the status"
        );
        claim.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-11-27T10:00:00Z".parse().expect("a time"),
            ));
        // The API server moves the generation as the deletion begins.
        claim.metadata.generation = Some(3);
        assert_eq!(
            tell(&claim),
            Some(true),
            "its deletion: only what templates read"
        );
        claim.metadata.finalizers = Some(Vec::new());
        assert_eq!(tell(&claim), Some(true), "its finalizers' removal");
        let mut told = |event| {
            summaries
                .apply_telling(&event)
                .map(|(_, only_rendered)| only_rendered)
        };
        assert_eq!(told(Event::Delete(claim.clone())), Some(false));
        assert_eq!(told(Event::InitApply(claim)), Some(false));
        assert_eq!(told(Event::InitDone), None);
    }
}

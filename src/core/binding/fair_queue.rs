//! Fair lines for short pools (not in Poolboy, where every waiting claim
//! races for a freed handle and a tenant with many waiting claims wins most of them): the
//! claims waiting for a pool are served first come, first served within a namespace and
//! round-robin across namespaces (counting the handles each already holds), so that one
//! tenant's burst cannot starve the others.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::OperatorDomain;
use crate::api::claim::ResourceClaimStatus;
use crate::core::claim::resolve::requested_pool;
use crate::core::claim::status::{WAITING_FOR_POOL, WAITING_IN_LINE};
use crate::core::conditions::{self, BOUND};

/// A claim waiting in a pool's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Waiting {
    pub namespace: String,
    pub name: String,
    /// `metadata.creationTimestamp` in milliseconds since the epoch; `None` (not dated yet)
    /// queues last in its namespace.
    pub created: Option<i64>,
}

impl Waiting {
    /// The claim of `metadata` as a place in line.
    pub(crate) fn of(metadata: &ObjectMeta) -> Self {
        Self {
            namespace: metadata.namespace.clone().unwrap_or_default(),
            name: metadata.name.clone().unwrap_or_default(),
            created: metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_millisecond()),
        }
    }

    fn arrival(&self) -> (bool, i64, &str) {
        (
            self.created.is_none(),
            self.created.unwrap_or(i64::MAX),
            &self.name,
        )
    }
}

/// Whether the claim of `metadata` and `status` is in the line of `pool`: it names the pool,
/// holds no handle, is not being deleted, and an earlier pass judged it waiting for the pool.
pub(crate) fn waits_for(
    metadata: &ObjectMeta,
    status: Option<&ResourceClaimStatus>,
    pool: &str,
    domain: &OperatorDomain,
) -> bool {
    metadata.deletion_timestamp.is_none()
        && requested_pool(metadata, domain) == Some(pool)
        && status.and_then(|s| s.resource_handle.as_ref()).is_none()
        && status
            .and_then(|s| s.conditions.as_deref())
            .and_then(|c| conditions::find(c, BOUND))
            .is_some_and(|c| c.reason == WAITING_FOR_POOL || c.reason == WAITING_IN_LINE)
}

/// The line in serving order, round-robin across namespaces by share: a namespace's claims,
/// oldest first, take rounds `held`, `held + 1`, … where `held` is the number of the pool's
/// handles its claims hold already; each round serves its claims in the order of their
/// namespaces' oldest waiting claim. A namespace served a moment ago holds one more handle,
/// so the next free handle goes to another namespace: a burst of one tenant takes turns with
/// the others instead of being served first because it came first.
pub(crate) fn fair_order(
    mut waiting: Vec<Waiting>,
    held: &BTreeMap<String, usize>,
) -> Vec<Waiting> {
    waiting.sort_by(|a, b| a.arrival().cmp(&b.arrival()));
    let mut by_namespace: BTreeMap<&str, Vec<&Waiting>> = BTreeMap::new();
    for claim in &waiting {
        by_namespace
            .entry(&claim.namespace)
            .or_default()
            .push(claim);
    }
    // Each claim with its round and its namespace's oldest claim, which orders the round.
    let mut ranked: Vec<(usize, &Waiting, &Waiting)> = Vec::new();
    for (namespace, claims) in &by_namespace {
        let base = held.get(*namespace).copied().unwrap_or(0);
        for (rank, claim) in claims.iter().enumerate() {
            ranked.push((base + rank, claims[0], claim));
        }
    }
    ranked.sort_by(|a, b| {
        (a.0, a.1.arrival(), &a.1.namespace).cmp(&(b.0, b.1.arrival(), &b.1.namespace))
    });
    ranked
        .into_iter()
        .map(|(_, _, claim)| claim.clone())
        .collect()
}

/// Where claim `namespace/name` stands in the fair line of `waiting` (0 is next), and how long
/// the line is; `None` when it is not in it.
pub(crate) fn position(
    waiting: Vec<Waiting>,
    held: &BTreeMap<String, usize>,
    namespace: &str,
    name: &str,
) -> Option<(usize, usize)> {
    let order = fair_order(waiting, held);
    let of = order.len();
    order
        .iter()
        .position(|c| c.namespace == namespace && c.name == name)
        .map(|at| (at, of))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(namespace: &str, name: &str, created: i64) -> Waiting {
        Waiting {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            created: Some(created),
        }
    }

    fn names(order: &[Waiting]) -> Vec<String> {
        order
            .iter()
            .map(|c| format!("{}/{}", c.namespace, c.name))
            .collect()
    }

    #[test]
    fn a_burst_of_one_namespace_takes_turns_with_the_others() {
        // Tenant a's burst of four came first; b and c came later, one and two claims.
        let line = vec![
            claim("a", "a1", 1),
            claim("a", "a2", 2),
            claim("a", "a3", 3),
            claim("a", "a4", 4),
            claim("c", "c1", 6),
            claim("b", "b1", 5),
            claim("c", "c2", 7),
        ];
        assert_eq!(
            names(&fair_order(line, &BTreeMap::new())),
            ["a/a1", "b/b1", "c/c1", "a/a2", "c/c2", "a/a3", "a/a4"]
        );
    }

    #[test]
    fn within_a_namespace_first_come_first_served() {
        let line = vec![
            claim("a", "late", 9),
            claim("a", "early", 1),
            claim("a", "mid", 5),
        ];
        assert_eq!(
            names(&fair_order(line, &BTreeMap::new())),
            ["a/early", "a/mid", "a/late"]
        );
        let undated = Waiting {
            namespace: "a".to_owned(),
            name: "new".to_owned(),
            created: None,
        };
        let line = vec![undated, claim("a", "old", 1)];
        assert_eq!(
            names(&fair_order(line, &BTreeMap::new())),
            ["a/old", "a/new"]
        );
    }

    #[test]
    fn the_position_counts_from_zero_and_says_the_length() {
        let line = vec![
            claim("a", "a1", 1),
            claim("a", "a2", 2),
            claim("b", "b1", 3),
        ];
        assert_eq!(
            position(line.clone(), &BTreeMap::new(), "b", "b1"),
            Some((1, 3))
        );
        assert_eq!(
            position(line.clone(), &BTreeMap::new(), "a", "a2"),
            Some((2, 3))
        );
        assert_eq!(position(line, &BTreeMap::new(), "z", "z1"), None);
    }

    #[test]
    fn a_namespace_that_holds_handles_already_waits_its_turn() {
        // a's claims are all older, but a holds one handle already (a1 was just served): b's
        // first claim goes before a's next.
        let line = vec![
            claim("a", "a2", 2),
            claim("a", "a3", 3),
            claim("b", "b1", 5),
        ];
        let held = BTreeMap::from([("a".to_owned(), 1)]);
        assert_eq!(
            names(&fair_order(line.clone(), &held)),
            ["b/b1", "a/a2", "a/a3"]
        );
        // Without that, the oldest namespace goes first in each round.
        assert_eq!(
            names(&fair_order(line, &BTreeMap::new())),
            ["a/a2", "b/b1", "a/a3"]
        );
    }

    #[test]
    fn a_claim_is_in_a_pools_line_once_judged_waiting_for_it() {
        let domain = OperatorDomain::default();
        let claim = |reason: &str, handle: bool| {
            let mut status = serde_json::json!({"conditions": [{"type": "Bound",
                "status": "False", "reason": reason, "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
            if handle {
                status["resourceHandle"] = serde_json::json!({"apiVersion": "v1",
                    "kind": "ResourceHandle", "name": "guid-a", "namespace": "poolboy"});
            }
            crate::core::test_fixtures::claim(&format!(
                "metadata: {{name: c, annotations: {{poolboy.gpte.redhat.com/resource-pool-name: p}}}}\n\
                 spec: {{}}\nstatus: {status}"
            ))
        };
        let in_line = |c: &crate::api::ResourceClaim, pool: &str| {
            waits_for(&c.metadata, c.status.as_ref(), pool, &domain)
        };
        assert!(in_line(&claim(WAITING_FOR_POOL, false), "p"));
        assert!(in_line(&claim(WAITING_IN_LINE, false), "p"));
        assert!(
            !in_line(&claim(WAITING_FOR_POOL, false), "q"),
            "another pool"
        );
        assert!(
            !in_line(&claim(WAITING_FOR_POOL, true), "p"),
            "holds a handle"
        );
        assert!(
            !in_line(&claim("WaitingForHandle", false), "p"),
            "not judged so"
        );
    }
}

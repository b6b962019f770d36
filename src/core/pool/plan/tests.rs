use chrono::TimeDelta;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::core::naming::NAME_ALPHABET;
use crate::core::test_fixtures::{now, pool_with_spec as pool};

/// `handles` as the controller hands them to the plan.
fn shared(handles: &[ResourceHandle]) -> Vec<Arc<ResourceHandle>> {
    handles.iter().cloned().map(Arc::new).collect()
}

/// An unbound handle of `pool` with `status` (JSON) as given.
fn handle(name: &str, status: Value) -> ResourceHandle {
    let mut value = json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceHandle",
        "metadata": {"name": name, "namespace": "poolboy"},
        "spec": {
            "resourcePool": {"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourcePool",
                             "name": "pool", "namespace": "poolboy"},
        },
    });
    if !status.is_null() {
        value["status"] = status;
    }
    serde_json::from_value(value).expect("valid handle")
}

fn ready(name: &str) -> ResourceHandle {
    handle(name, json!({"ready": true}))
}

fn unhealthy(name: &str) -> ResourceHandle {
    handle(name, json!({"resources": [{"healthy": false}]}))
}

fn plan(pool: &ResourcePool, unbound: &[ResourceHandle], pending: &[&str]) -> PoolPlan {
    let pending: Vec<String> = pending.iter().map(|s| (*s).to_owned()).collect();
    plan_pool(&PoolInput {
        pool,
        unbound: &shared(unbound),
        pending: &pending,
        scaling_demand: 0,
        stale: &BTreeSet::new(),
        autoscale: None,
        bound: 0,
        bound_unready: 0,
    })
}

#[test]
fn an_empty_pool_creates_min_available() {
    let p = pool(json!({"minAvailable": 3}));
    let plan = plan(&p, &[], &[]);
    assert_eq!(plan.create, 3);
    assert!(plan.delete.is_empty());
    assert_eq!(
        plan.count,
        ResourceHandleCount {
            available: 0,
            ready: 0
        }
    );
}

#[test]
fn a_full_pool_creates_nothing() {
    let p = pool(json!({"minAvailable": 2}));
    assert_eq!(
        plan(&p, &[ready("guid-a"), handle("guid-b", Value::Null)], &[]).create,
        0
    );
}

#[test]
fn min_available_defaults_to_zero() {
    assert_eq!(plan(&pool(json!({})), &[], &[]).create, 0);
}

#[test]
fn the_deficit_counts_existing_handles() {
    let p = pool(json!({"minAvailable": 5}));
    assert_eq!(plan(&p, &[ready("guid-a"), ready("guid-b")], &[]).create, 3);
}

#[test]
fn pending_handles_count_as_available_and_unready() {
    let p = pool(json!({"minAvailable": 3, "maxUnready": 2}));
    let plan = plan(&p, &[ready("guid-a")], &["guid-b"]);
    assert_eq!(plan.create, 1);
    assert_eq!(
        plan.count,
        ResourceHandleCount {
            available: 2,
            ready: 1
        }
    );
    // With the pending handle also unready, maxUnready 1 would allow nothing.
    let p = pool(json!({"minAvailable": 3, "maxUnready": 1}));
    assert_eq!(
        super::tests::plan(&p, &[ready("guid-a")], &["guid-b"]).create,
        0
    );
}

#[test]
fn a_pending_name_the_store_shows_is_counted_once() {
    let p = pool(json!({"minAvailable": 3}));
    let plan = plan(&p, &[ready("guid-a")], &["guid-a", "guid-b", "guid-b"]);
    assert_eq!(plan.count.available, 2);
    assert_eq!(plan.create, 1);
}

#[test]
fn max_unready_caps_the_handles_in_flight() {
    let p = pool(json!({"minAvailable": 10, "maxUnready": 3}));
    assert_eq!(plan(&p, &[], &[]).create, 3);
    let unready = [
        handle("guid-a", Value::Null),
        handle("guid-b", json!({"ready": false})),
    ];
    assert_eq!(plan(&p, &unready, &[]).create, 1);
    let mixed = [
        ready("guid-a"),
        ready("guid-b"),
        handle("guid-c", Value::Null),
    ];
    assert_eq!(plan(&p, &mixed, &[]).create, 2);
}

#[test]
fn max_unready_zero_creates_nothing() {
    let p = pool(json!({"minAvailable": 3, "maxUnready": 0}));
    assert_eq!(plan(&p, &[], &[]).create, 0);
}

#[test]
fn more_unready_than_max_unready_creates_nothing() {
    let p = pool(json!({"minAvailable": 10, "maxUnready": 1}));
    let unready = [handle("guid-a", Value::Null), handle("guid-b", Value::Null)];
    assert_eq!(plan(&p, &unready, &[]).create, 0);
}

#[test]
fn unhealthy_handles_are_deleted_and_replaced_when_the_pool_asks() {
    let p = pool(json!({"minAvailable": 2, "deleteUnhealthyResourceHandles": true}));
    let plan = plan(&p, &[ready("guid-a"), unhealthy("guid-b")], &[]);
    assert_eq!(plan.delete, vec![("guid-b".to_owned(), Removal::Unhealthy)]);
    assert_eq!(plan.create, 1);
    assert_eq!(
        plan.count,
        ResourceHandleCount {
            available: 1,
            ready: 1
        }
    );
    let status = plan.status(&[], None);
    let names: Vec<&str> = status
        .resource_handles
        .iter()
        .flatten()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, ["guid-a"]);
}

#[test]
fn unhealthy_handles_stay_without_delete_unhealthy() {
    for spec in [
        json!({"minAvailable": 2}),
        json!({"minAvailable": 2, "deleteUnhealthyResourceHandles": false}),
    ] {
        let plan = plan(&pool(spec), &[ready("guid-a"), unhealthy("guid-b")], &[]);
        assert!(plan.delete.is_empty());
        assert_eq!(plan.create, 0);
    }
}

#[test]
fn unknown_health_is_not_unhealthy() {
    let p = pool(json!({"minAvailable": 1, "deleteUnhealthyResourceHandles": true}));
    // Waiting without a health value: health unknown (Δ§3.2 is_healthy), kept.
    let waiting = handle(
        "guid-a",
        json!({"resources": [{"waitingFor": "ResourceClaim"}]}),
    );
    let plan = plan(&p, &[waiting], &[]);
    assert!(plan.delete.is_empty());
    // `status.healthy: false` alone is not the computed health.
    let flagged = handle("guid-b", json!({"healthy": false}));
    let p = pool(json!({"minAvailable": 1, "deleteUnhealthyResourceHandles": true}));
    assert!(super::tests::plan(&p, &[flagged], &[]).delete.is_empty());
}

#[test]
fn status_entries_carry_only_known_values() {
    let p = pool(json!({"minAvailable": 4}));
    let handles = [
        ready("guid-c"),
        handle("guid-a", Value::Null),
        handle(
            "guid-b",
            json!({"ready": false, "resources": [{"healthy": true}]}),
        ),
    ];
    let plan = plan(&p, &handles, &["guid-d"]);
    assert_eq!(plan.create, 0);
    let status = plan.status(&[], None);
    let json = serde_json::to_value(&status).expect("serialises");
    assert_eq!(
        json,
        json!({
            "resourceHandleCount": {"available": 4, "ready": 1},
            "resourceHandles": [
                {"name": "guid-a", "healthy": true},
                {"name": "guid-b", "healthy": true, "ready": false},
                {"name": "guid-c", "healthy": true, "ready": true},
                {"name": "guid-d", "healthy": true},
            ],
        })
    );
}

#[test]
fn new_handles_are_listed_but_not_counted() {
    let p = pool(json!({"minAvailable": 3}));
    let plan = plan(&p, &[ready("guid-b")], &[]);
    assert_eq!(plan.create, 2);
    let status = plan.status(&["guid-c".to_owned(), "guid-a".to_owned()], None);
    assert_eq!(
        status.resource_handle_count,
        Some(ResourceHandleCount {
            available: 1,
            ready: 1
        })
    );
    let names: Vec<&str> = status
        .resource_handles
        .iter()
        .flatten()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, ["guid-a", "guid-b", "guid-c"]);
}

#[test]
fn status_keeps_conditions() {
    let p = pool(json!({"minAvailable": 0}));
    let current: ResourcePoolStatus = serde_json::from_value(json!({
        "conditions": [{"type": "Valid", "status": "True", "reason": "R", "message": "",
                         "lastTransitionTime": "2026-11-21T00:00:00Z"}],
    }))
    .expect("valid status");
    let status = plan(&p, &[], &[]).status(&[], Some(&current));
    assert_eq!(status.conditions, current.conditions);
    assert_eq!(
        status.resource_handles,
        Some(Vec::new()),
        "never null (Δ B17)"
    );
}

#[test]
fn a_pending_handle_showing_up_does_not_change_the_status() {
    // Right after a create the store does not show the handle; once it does (no status yet),
    // the desired status is the same, so nothing is written.
    let p = pool(json!({"minAvailable": 2}));
    let before = plan(&p, &[ready("guid-a")], &["guid-b"]).status(&[], None);
    let after = plan(&p, &[ready("guid-a"), handle("guid-b", Value::Null)], &[]).status(&[], None);
    assert_eq!(before, after);
}

#[test]
fn lowering_min_available_deletes_nothing() {
    let p = pool(json!({"minAvailable": 1}));
    let plan = plan(
        &p,
        &[ready("guid-a"), ready("guid-b"), ready("guid-c")],
        &[],
    );
    assert_eq!(plan.create, 0);
    assert!(plan.delete.is_empty());
    assert_eq!(plan.count.available, 3);
}

#[test]
fn scaling_demand_is_created_under_max_unready() {
    let p = pool(json!({"minAvailable": 1, "maxUnready": 4}));
    let full = [ready("guid-a")];
    let with_scaling = |demand| {
        plan_pool(&PoolInput {
            pool: &p,
            unbound: &shared(&full),
            pending: &[],
            scaling_demand: demand,
            stale: &BTreeSet::new(),
            autoscale: None,
            bound: 0,
            bound_unready: 0,
        })
        .create
    };
    assert_eq!(with_scaling(0), 0);
    assert_eq!(with_scaling(3), 3);
    assert_eq!(with_scaling(9), 4);
}

#[test]
fn a_small_refill_may_wait_but_a_drained_pool_a_scaling_or_a_cap_may_not() {
    let full_but = |missing: usize| -> Vec<ResourceHandle> {
        (missing..20)
            .map(|i| ready(&format!("guid-{i:02}")))
            .collect()
    };
    let twenty = pool(json!({"minAvailable": 20}));
    let refill = |p: &ResourcePool, missing, scaling_demand| {
        let plan = plan_pool(&PoolInput {
            pool: p,
            unbound: &shared(&full_but(missing)),
            pending: &[],
            scaling_demand,
            stale: &BTreeSet::new(),
            autoscale: None,
            bound: 0,
            bound_unready: 0,
        });
        (plan.create, plan.refill_may_wait)
    };
    assert_eq!(refill(&twenty, 0, 0), (0, false), "nothing to refill");
    assert_eq!(refill(&twenty, 1, 0), (1, true));
    assert_eq!(refill(&twenty, 4, 0), (4, true));
    assert_eq!(
        refill(&twenty, 5, 0),
        (5, false),
        "a quarter of the pool is gone"
    );
    assert_eq!(refill(&twenty, 0, 2), (2, false), "a scaling's demand");
    assert_eq!(refill(&twenty, 1, 1), (1, false), "a scaling's demand");
    let capped = pool(json!({"minAvailable": 20, "maxUnready": 1}));
    assert_eq!(refill(&capped, 2, 0), (1, false), "held by a cap");
    let small = pool(json!({"minAvailable": 3}));
    let plan = plan(&small, &[ready("guid-a"), ready("guid-b")], &[]);
    assert_eq!(
        (plan.create, plan.refill_may_wait),
        (1, false),
        "a small pool"
    );
}

/// The binds a full pool may take before its refill stops waiting are exactly those whose
/// refill [`plan_pool`] lets wait.
#[test]
fn the_binds_that_may_wait_are_those_whose_refill_may_wait() {
    let full_but = |missing: usize, size: usize| -> Vec<ResourceHandle> {
        (missing..size)
            .map(|i| ready(&format!("guid-{i:02}")))
            .collect()
    };
    for spec in [
        json!({"minAvailable": 20}),
        json!({"minAvailable": 10}),
        json!({"minAvailable": 3}),
        json!({"minAvailable": 20, "maxUnready": 2}),
        json!({"minAvailable": 20, "maxConcurrent": 1}),
        json!({"minAvailable": 20, "maxSize": 22}),
    ] {
        let p = pool(spec.clone());
        let size = usize::try_from(p.spec.min_available.unwrap_or(0)).unwrap_or(0);
        // `binds` of the pool's handles bound: they count as bound (and ready) now.
        let after = |binds: usize| {
            plan_pool(&PoolInput {
                pool: &p,
                unbound: &shared(&full_but(binds, size)),
                pending: &[],
                scaling_demand: 0,
                stale: &BTreeSet::new(),
                autoscale: None,
                bound: binds,
                bound_unready: 0,
            })
        };
        let full = after(0);
        let waiting = (1..=size)
            .take_while(|&binds| after(binds).refill_may_wait)
            .count();
        assert_eq!(full.binds_may_wait, waiting, "{spec}");
    }
    let twenty = pool(json!({"minAvailable": 20}));
    assert_eq!(plan(&twenty, &full_but(0, 20), &[]).binds_may_wait, 4);
    let scaled = plan_pool(&PoolInput {
        pool: &twenty,
        unbound: &shared(&full_but(0, 20)),
        pending: &[],
        scaling_demand: 1,
        stale: &BTreeSet::new(),
        autoscale: None,
        bound: 0,
        bound_unready: 0,
    });
    assert_eq!(scaled.binds_may_wait, 0, "a scaling under way");
}

#[test]
fn handles_of_the_pool() {
    let p = pool(json!({}));
    let domain = OperatorDomain::default();
    assert!(is_unbound_handle_of_pool(&ready("guid-a"), &p, &domain));
    let mut ignored = ready("guid-i");
    ignored.metadata.labels = Some([(domain.ignore_label(), String::new())].into());
    assert!(is_handle_of_pool(&ignored, &p));
    assert!(!is_unbound_handle_of_pool(&ignored, &p, &domain));
    let mut bound = ready("guid-b");
    bound.spec.resource_claim = Some(Default::default());
    assert!(is_handle_of_pool(&bound, &p));
    assert!(!is_unbound_handle_of_pool(&bound, &p, &domain));
    let mut deleting = ready("guid-c");
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
    assert!(!is_unbound_handle_of_pool(&deleting, &p, &domain));
    // Released by a claim: on its way out, so the pool replaces it.
    let mut released = ready("guid-r");
    released.metadata.annotations =
        Some([(domain.released_from_claim(), "user1/c".to_owned())].into());
    assert!(is_handle_of_pool(&released, &p));
    assert!(!is_unbound_handle_of_pool(&released, &p, &domain));
    let mut other = ready("guid-d");
    if let Some(reference) = other.spec.resource_pool.as_mut() {
        reference.namespace = "elsewhere".to_owned();
    }
    assert!(!is_handle_of_pool(&other, &p));
    let mut none = ready("guid-e");
    none.spec.resource_pool = None;
    assert!(!is_handle_of_pool(&none, &p));
}

#[test]
fn new_handle_names_look_like_generated_ones() {
    let mut rng = rand::rng();
    for _ in 0..100 {
        let name = random_handle_name(&mut rng);
        assert_eq!(name.len(), 10);
        assert!(name.starts_with("guid-"));
        assert!(name[5..].bytes().all(|b| NAME_ALPHABET.contains(&b)));
    }
}

// --- PendingHandles ---

fn names(pending: &PendingHandles) -> Vec<String> {
    pending.names()
}

/// What the store shows: the handles named.
fn shown<'a>(names: &'a [&'a str]) -> impl Fn(&str) -> bool + 'a {
    move |name| names.contains(&name)
}

#[test]
fn bound_handles_the_store_shows_are_not_remembered() {
    let mut memory = PendingHandles::default();
    memory.observe(|_| true, [], now());
    assert!(
        memory.is_empty(),
        "nothing pending or listed: nothing to remember"
    );
}

#[test]
fn an_expected_name_is_pending_until_the_store_shows_it() {
    let mut memory = PendingHandles::default();
    memory.expect("guid-a", now());
    memory.observe(shown(&[]), ["guid-a"], now());
    assert_eq!(names(&memory), ["guid-a"]);
    memory.observe(shown(&["guid-a"]), ["guid-a"], now());
    assert!(names(&memory).is_empty());
    // Deleted later (gone from the store) while a stale status still lists it: not pending.
    memory.observe(shown(&[]), ["guid-a"], now() + TimeDelta::seconds(1));
    assert!(names(&memory).is_empty());
}

#[test]
fn an_expected_name_counts_even_when_the_status_drops_it() {
    let mut memory = PendingHandles::default();
    memory.expect("guid-a", now());
    memory.observe(shown(&[]), [], now());
    assert_eq!(names(&memory), ["guid-a"]);
}

#[test]
fn a_name_another_process_reserved_is_pending() {
    let mut memory = PendingHandles::default();
    memory.observe(shown(&["guid-a"]), ["guid-a", "guid-b"], now());
    assert_eq!(names(&memory), ["guid-b"]);
    // Looked up on the API server after a moment; confirmed, it waits for the store.
    assert_eq!(
        memory.next_expiry(),
        Some(now() + PENDING_HANDLE_CONFIRM_AFTER)
    );
    memory.confirm("guid-b");
    assert_eq!(memory.next_expiry(), Some(now() + PENDING_HANDLE_TTL));
    memory.observe(shown(&["guid-a", "guid-b"]), ["guid-a", "guid-b"], now());
    assert!(names(&memory).is_empty());
    assert_eq!(memory.next_expiry(), None);
}

/// A name a process reserved in the status and died before creating stops counting
/// as soon as the API server says its handle does not exist, not after the whole TTL.
#[test]
fn a_pending_name_is_confirmed_or_settled_after_a_moment() {
    let mut memory = PendingHandles::default();
    memory.observe(shown(&[]), ["guid-dead", "guid-lagging"], now());
    assert!(memory.to_confirm(now()).is_empty(), "too early to ask");
    let later = now() + PENDING_HANDLE_CONFIRM_AFTER;
    assert_eq!(memory.to_confirm(later), ["guid-dead", "guid-lagging"]);
    memory.settle("guid-dead", later);
    memory.confirm("guid-lagging");
    assert_eq!(names(&memory), ["guid-lagging"]);
    assert!(memory.to_confirm(later).is_empty(), "asked once");
    // A stale status listing the dead name does not bring it back.
    memory.observe(shown(&[]), ["guid-dead", "guid-lagging"], later);
    assert_eq!(names(&memory), ["guid-lagging"]);
}

#[test]
fn pending_names_expire_and_stay_settled() {
    let mut memory = PendingHandles::default();
    memory.expect("guid-a", now());
    memory.observe(shown(&[]), ["guid-b"], now());
    assert_eq!(names(&memory), ["guid-a", "guid-b"]);
    let later = now() + PENDING_HANDLE_TTL;
    memory.observe(shown(&[]), ["guid-a", "guid-b"], later);
    assert!(names(&memory).is_empty());
    // Still listed by a status: not adopted again.
    memory.observe(
        shown(&[]),
        ["guid-a", "guid-b"],
        later + TimeDelta::seconds(1),
    );
    assert!(names(&memory).is_empty());
}

#[test]
fn a_failed_create_is_not_adopted_from_the_status() {
    let mut memory = PendingHandles::default();
    memory.expect("guid-a", now());
    memory.settle("guid-a", now());
    memory.observe(shown(&[]), ["guid-a"], now());
    assert!(names(&memory).is_empty());
}

#[test]
fn settled_names_are_forgotten_once_unlisted_and_old() {
    let mut memory = PendingHandles::default();
    memory.observe(shown(&["guid-a"]), ["guid-a"], now());
    memory.observe(shown(&[]), [], now() + TimeDelta::seconds(1));
    assert!(
        !memory.is_empty(),
        "kept for a TTL: a stale status may list it"
    );
    memory.observe(shown(&[]), ["guid-a"], now() + TimeDelta::seconds(2));
    assert!(names(&memory).is_empty());
    memory.observe(shown(&[]), [], now() + PENDING_HANDLE_TTL * 2);
    assert!(memory.is_empty());
}

proptest! {
    /// Never more than `maxUnready` unready handles after the creates, never beyond
    /// `minAvailable` from the deficit alone, and never a negative count.
    #[test]
    fn creates_respect_min_available_and_max_unready(
        min_available in 0i64..20,
        max_unready in proptest::option::of(0i64..10),
        ready_count in 0usize..10,
        unready_count in 0usize..10,
        pending_count in 0usize..5,
    ) {
        let mut spec = json!({"minAvailable": min_available});
        if let Some(m) = max_unready {
            spec["maxUnready"] = json!(m);
        }
        let p = pool(spec);
        let mut handles: Vec<ResourceHandle> =
            (0..ready_count).map(|i| ready(&format!("guid-r{i}"))).collect();
        handles.extend((0..unready_count).map(|i| handle(&format!("guid-u{i}"), Value::Null)));
        let pending: Vec<String> = (0..pending_count).map(|i| format!("guid-p{i}")).collect();
        let plan = plan_pool(&PoolInput {
            pool: &p,
            unbound: &shared(&handles),
            pending: &pending,
            scaling_demand: 0,
            stale: &BTreeSet::new(),
            autoscale: None,
            bound: 0,
            bound_unready: 0,
        });
        let available = (ready_count + unready_count + pending_count) as i64;
        let unready = (unready_count + pending_count) as i64;
        let create = plan.create as i64;
        prop_assert!(available + create <= min_available.max(available));
        if let Some(m) = max_unready {
            prop_assert!(create == 0 || unready + create <= m);
        }
        // As many as allowed: either the pool is full or the throttle is reached.
        prop_assert!(
            available + create >= min_available
                || max_unready.is_some_and(|m| unready + create >= m)
        );
        prop_assert_eq!(plan.count.available, available);
        prop_assert_eq!(plan.count.ready, ready_count as i64);
    }
}

#[test]
fn a_pool_gets_a_valid_condition_only_once_it_had_a_problem() {
    let mut status = ResourcePoolStatus::default();
    let change = set_pool_validity(&mut status, None, Some(1), now());
    assert_eq!(change, Change::Unchanged);
    assert_eq!(
        status.conditions, None,
        "no empty conditions list is written"
    );

    let change = set_pool_validity(&mut status, Some("spec.provider.name: a"), Some(1), now());
    assert_eq!(change, Change::Transitioned);
    let later = now() + TimeDelta::minutes(5);
    let change = set_pool_validity(&mut status, Some("spec.provider.name: b"), Some(2), later);
    assert_eq!(change, Change::Reworded);
    let conditions = status.conditions.as_deref().expect("a Valid condition");
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0].status, "False");
    assert_eq!(conditions[0].message, "spec.provider.name: b");
    assert_eq!(
        conditions[0].last_transition_time,
        crate::core::lifespan::api_time(now()),
        "a new message is no transition"
    );
}

#[test]
fn new_handle_names_avoid_taken_names_and_each_other() {
    use rand::SeedableRng;
    let seeded = || rand::rngs::StdRng::seed_from_u64(7);
    // The names the same generator gives first: two of them are taken.
    let first: Vec<String> = {
        let mut rng = seeded();
        (0..3).map(|_| random_handle_name(&mut rng)).collect()
    };
    let taken = [first[0].as_str(), first[2].as_str()];
    let names = new_handle_names(3, |name| taken.contains(&name), &mut seeded());
    assert_eq!(names.len(), 3);
    assert_eq!(names[0], first[1], "the first free name is kept");
    for name in &names {
        assert!(!taken.contains(&name.as_str()), "{name} is taken");
        assert!(
            name.starts_with("guid-") && name.len() == "guid-".len() + 5,
            "{name}"
        );
    }
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
}

#[test]
fn max_size_counts_bound_handles_and_max_concurrent_those_being_provisioned() {
    let capped = |spec: Value, unbound: &[ResourceHandle], bound: usize, bound_unready: usize| {
        let p = pool(spec);
        let plan = plan_pool(&PoolInput {
            pool: &p,
            unbound: &shared(unbound),
            pending: &[],
            scaling_demand: 0,
            stale: &BTreeSet::new(),
            autoscale: None,
            bound,
            bound_unready,
        });
        (plan.create, plan.capped_by)
    };
    // 3 bound + 1 unbound of at most 5: one more, though 3 are wanted.
    assert_eq!(
        capped(
            json!({"minAvailable": 4, "maxSize": 5}),
            &[ready("guid-a")],
            3,
            0
        ),
        (1, Some(PoolCap::Size(5)))
    );
    // Full: none, and the cap says why.
    assert_eq!(
        capped(json!({"minAvailable": 2, "maxSize": 3}), &[], 3, 0),
        (0, Some(PoolCap::Size(3)))
    );
    // 2 bound handles still provisioning, 1 unbound unready, at most 4 at once: one more.
    assert_eq!(
        capped(
            json!({"minAvailable": 5, "maxConcurrent": 4}),
            &[handle("guid-u", json!({}))],
            2,
            2
        ),
        (1, Some(PoolCap::Concurrent(4)))
    );
    // The tightest cap decides; no cap reached, none reported.
    assert_eq!(
        capped(
            json!({"minAvailable": 3, "maxSize": 10, "maxUnready": 1}),
            &[],
            0,
            0
        ),
        (1, Some(PoolCap::Unready(1)))
    );
    assert_eq!(
        capped(json!({"minAvailable": 2, "maxSize": 10}), &[], 0, 0),
        (2, None)
    );
    assert_eq!(PoolCap::Size(5).to_string(), "5 handles in all (maxSize)");
}

#[test]
fn bound_counts_leave_out_unbound_and_deleted_handles() {
    let mut bound_ready = ready("guid-a");
    bound_ready.spec.resource_claim = Some(Default::default());
    let mut bound_unready = handle("guid-b", json!({}));
    bound_unready.spec.resource_claim = Some(Default::default());
    let mut deleting = bound_unready.clone();
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
    let unbound = ready("guid-c");
    let mut counts = BoundCounts::default();
    for handle in [&bound_ready, &bound_unready, &deleting, &unbound] {
        counts.add(BoundCounts::of_handle(handle));
    }
    assert_eq!(
        counts,
        BoundCounts {
            count: 2,
            unready: 1
        }
    );
    counts.remove(BoundCounts::of_handle(&bound_unready));
    assert_eq!(
        counts,
        BoundCounts {
            count: 1,
            unready: 0
        }
    );
}

/// Plans `unbound` with the handles named in `stale` of an earlier version.
fn plan_with_stale(pool: &ResourcePool, unbound: &[ResourceHandle], stale: &[&str]) -> PoolPlan {
    let stale: BTreeSet<String> = stale.iter().map(|s| (*s).to_owned()).collect();
    plan_pool(&PoolInput {
        pool,
        unbound: &shared(unbound),
        pending: &[],
        scaling_demand: 0,
        stale: &stale,
        autoscale: None,
        bound: 0,
        bound_unready: 0,
    })
}

fn deleted_stale(plan: &PoolPlan) -> Vec<&str> {
    plan.delete
        .iter()
        .filter(|(_, removal)| *removal == Removal::Stale)
        .map(|(name, _)| name.as_str())
        .collect()
}

#[test]
fn stale_handles_are_replaced_before_they_go() {
    let p = pool(json!({"minAvailable": 2}));
    let handles = [ready("guid-a"), ready("guid-b")];
    // Both stale: two current ones are made, none deleted while nothing replaces them.
    let plan = plan_with_stale(&p, &handles, &["guid-a", "guid-b"]);
    assert_eq!(plan.create, 2);
    assert!(plan.delete.is_empty());
    assert_eq!(plan.stale, 2);
    assert_eq!(plan.count.available, 2);

    // One current replacement is ready: the older stale handle goes, no more are made.
    let mut a = ready("guid-a");
    a.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        (now() - TimeDelta::hours(2))
            .to_rfc3339()
            .parse()
            .expect("timestamp"),
    ));
    let mut b = ready("guid-b");
    b.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        (now() - TimeDelta::hours(3))
            .to_rfc3339()
            .parse()
            .expect("timestamp"),
    ));
    let handles = [a, b, ready("guid-c"), handle("guid-d", Value::Null)];
    let plan = plan_with_stale(&p, &handles, &["guid-a", "guid-b"]);
    assert_eq!(deleted_stale(&plan), vec!["guid-b"]);
    assert_eq!(plan.create, 0);
    assert_eq!(plan.count.available, 3);
    assert_eq!(plan.count.ready, 2);
    assert!(plan.entries.iter().all(|e| e.name != "guid-b"));
}

#[test]
fn a_stale_handle_not_ready_yet_goes_at_once() {
    let p = pool(json!({"minAvailable": 1}));
    let handles = [handle("guid-a", Value::Null)];
    let plan = plan_with_stale(&p, &handles, &["guid-a"]);
    assert_eq!(deleted_stale(&plan), vec!["guid-a"]);
    assert_eq!(plan.create, 1);
    assert_eq!(plan.count.available, 0);
}

#[test]
fn replacements_are_made_under_max_unready() {
    let p = pool(json!({"minAvailable": 4, "maxUnready": 1}));
    let handles: Vec<ResourceHandle> = ["guid-a", "guid-b", "guid-c", "guid-d"]
        .into_iter()
        .map(ready)
        .collect();
    let plan = plan_with_stale(&p, &handles, &["guid-a", "guid-b", "guid-c", "guid-d"]);
    assert_eq!(plan.create, 1);
    assert_eq!(plan.capped_by, Some(PoolCap::Unready(1)));
    assert!(plan.delete.is_empty());
}

#[test]
fn a_pool_at_max_size_makes_room_by_deleting_stale_handles() {
    let p = pool(json!({"minAvailable": 2, "maxSize": 2}));
    let handles = [ready("guid-a"), ready("guid-b")];
    let plan = plan_with_stale(&p, &handles, &["guid-a", "guid-b"]);
    assert_eq!(plan.create, 0);
    assert_eq!(plan.capped_by, Some(PoolCap::Size(2)));
    assert_eq!(deleted_stale(&plan).len(), 2);
}

#[test]
fn without_stale_handles_the_plan_is_unchanged() {
    let p = pool(json!({"minAvailable": 3, "maxUnready": 2}));
    let handles = [ready("guid-a"), handle("guid-b", Value::Null)];
    let plan = plan_with_stale(&p, &handles, &[]);
    assert_eq!(plan.stale, 0);
    assert!(plan.delete.is_empty());
    assert_eq!(plan.create, 1);
}

#[test]
fn surplus_stale_handles_go_when_min_available_is_met_by_current_ones() {
    let p = pool(json!({"minAvailable": 1}));
    let handles = [ready("guid-a"), ready("guid-b"), ready("guid-c")];
    // Two stale, one current ready: both stale are surplus.
    let plan = plan_with_stale(&p, &handles, &["guid-a", "guid-b"]);
    let mut gone = deleted_stale(&plan);
    gone.sort_unstable();
    assert_eq!(gone, vec!["guid-a", "guid-b"]);
    assert_eq!(plan.create, 0);
}

#[test]
fn autoscale_replaces_min_available_and_shrinks_oldest_first_once_it_may() {
    use crate::api::pool::PoolAutoscaleStatus;
    let p = pool(json!({"minAvailable": 1}));
    let decision = |target: i64, shrink: bool| AutoscaleDecision {
        status: PoolAutoscaleStatus {
            target,
            reason: String::new(),
        },
        shrink,
    };
    let planned = |handles: &[ResourceHandle], d: &AutoscaleDecision| {
        plan_pool(&PoolInput {
            pool: &p,
            unbound: &shared(handles),
            pending: &[],
            scaling_demand: 0,
            stale: &BTreeSet::new(),
            autoscale: Some(d),
            bound: 0,
            bound_unready: 0,
        })
    };
    let grow = planned(&[ready("guid-a")], &decision(4, false));
    assert_eq!(grow.create, 3);
    assert!(grow.delete.is_empty());

    let mut old = ready("guid-z");
    old.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    let handles = [ready("guid-a"), old, ready("guid-b")];
    assert!(
        planned(&handles, &decision(1, false)).delete.is_empty(),
        "not yet"
    );
    let shrink = planned(&handles, &decision(2, true));
    assert_eq!(shrink.delete, vec![("guid-z".to_owned(), Removal::Surplus)]);
    assert_eq!(
        shrink.count,
        ResourceHandleCount {
            available: 2,
            ready: 2
        }
    );
    assert_eq!(shrink.create, 0);
}

#[test]
fn settled_names_are_swept_at_most_every_few_seconds_and_then_all_at_once() {
    let mut memory = PendingHandles::default();
    memory.observe(shown(&["guid-a"]), ["guid-a"], now());
    memory.observe(
        shown(&["guid-b"]),
        ["guid-b"],
        now() + TimeDelta::seconds(1),
    );
    // A sweep just before guid-a's TTL keeps it; past the TTL but within the sweep interval it
    // is still settled, and a stale status listing it does not make it pending.
    let last_sweep = now() + PENDING_HANDLE_TTL - TimeDelta::seconds(1);
    memory.observe(shown(&[]), [], last_sweep);
    memory.observe(shown(&[]), [], last_sweep + TimeDelta::seconds(2));
    memory.observe(shown(&[]), ["guid-a"], last_sweep + TimeDelta::seconds(3));
    assert!(names(&memory).is_empty());
    // The next sweep forgets both.
    memory.observe(shown(&[]), [], last_sweep + SETTLED_SWEEP_INTERVAL * 2);
    assert!(memory.is_empty());
}

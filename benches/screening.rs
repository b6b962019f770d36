//! `cargo bench --bench screening`: what the client's screening of collection reads
//! costs, next to what kube spends decoding the same LIST. No cluster needed.
//!
//! A LIST of 2,000 claims (about 1.5 KB each, templates a few levels deep) is screened as the
//! claim watch's LIST is (depth check and a trial decode of `ClaimObject`'s spec and status), as
//! a managed resource's is (depth check only), and decoded as kube decodes it
//! (`ObjectList<ClaimObject>`). Printed in MB/s, best of several runs.

use std::time::{Duration, Instant};

use kube::core::ObjectList;
use poolboy::api::kinds::ClaimObject;
use poolboy::screening::{TypedDecode, screen_list};

const CLAIMS: usize = 2_000;
const RUNS: usize = 10;

fn claim(index: usize) -> String {
    let data: Vec<String> = (0..20)
        .map(|i| format!(r#""key-{i}":"value {i} of claim {index}, with some text""#))
        .collect();
    format!(
        r#"{{"apiVersion":"poolboy.gpte.redhat.com/v1","kind":"ResourceClaim","metadata":{{"name":"claim-{index}","namespace":"tenant-{ns}","uid":"5f0c6a4e-0000-4000-8000-{index:012}","resourceVersion":"{rv}","generation":1,"labels":{{"app":"bench"}}}},"spec":{{"resources":[{{"name":"config","provider":{{"name":"config","namespace":"poolboy"}},"template":{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"labels":{{"kind":"config"}}}},"data":{{{data}}}}}}}]}},"status":{{"resourceHandle":{{"apiVersion":"poolboy.gpte.redhat.com/v1","kind":"ResourceHandle","name":"guid-{index}","namespace":"poolboy"}},"conditions":[{{"type":"Bound","status":"True","reason":"Bound","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}}]}}}}"#,
        ns = index % 50,
        rv = 1000 + index,
        data = data.join(","),
    )
}

/// The best time of `RUNS` runs of `work`.
fn best(mut work: impl FnMut()) -> Duration {
    (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            work();
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let items: Vec<String> = (0..CLAIMS).map(claim).collect();
    let body = format!(
        r#"{{"apiVersion":"poolboy.gpte.redhat.com/v1","items":[{}],"kind":"ResourceClaimList","metadata":{{"resourceVersion":"99999"}}}}"#,
        items.join(",")
    );
    let megabytes = body.len() as f64 / 1e6;
    let typed = Some(TypedDecode::of::<ClaimObject>());
    let report = |what: &str, time: Duration| {
        println!(
            "{what:<44} {:>8.1} ms {:>8.0} MB/s",
            time.as_secs_f64() * 1e3,
            megabytes / time.as_secs_f64()
        );
    };
    println!("a LIST of {CLAIMS} claims, {megabytes:.2} MB");
    report(
        "screen: depth + trial decode (our kinds)",
        best(|| {
            let screen = screen_list(&body, typed, false);
            assert!(screen.is_some_and(|s| s.body.is_none()));
        }),
    );
    report(
        "screen: depth only (managed resources)",
        best(|| {
            let screen = screen_list(&body, None, false);
            assert!(screen.is_some_and(|s| s.body.is_none()));
        }),
    );
    report(
        "kube's decode: ObjectList<ClaimObject>",
        best(|| {
            let list: ObjectList<ClaimObject> = serde_json::from_str(&body).expect("decodes");
            assert_eq!(list.items.len(), CLAIMS);
        }),
    );
}

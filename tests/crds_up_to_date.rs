//! The committed CRDs under `crds/` (and their copies in the chart, `helm/crds/`) are exactly
//! what `poolboy crd --dir crds` generates.

use poolboy::api::{OperatorDomain, crd};

#[test]
fn committed_crds_match_the_generator() {
    assert_directory_matches("crds");
}

#[test]
fn the_chart_ships_the_same_crds() {
    assert_directory_matches("helm/crds");
}

fn assert_directory_matches(relative: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    for one in crd::all(&OperatorDomain::default()) {
        let path = dir.join(crd::file_name(&one));
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let generated = crd::to_yaml(std::slice::from_ref(&one)).expect("CRDs serialise");
        assert!(
            committed == generated,
            "{} is stale: run `cargo run -- crd --dir {relative}` and commit the result",
            path.display()
        );
    }
}

#[test]
fn another_operator_domain_renames_group_and_crd() {
    let crds = crd::all(&OperatorDomain::new("poolboy.dev.local"));
    assert_eq!(crds.len(), 6);
    for one in &crds {
        assert_eq!(one.spec.group, "poolboy.dev.local");
        assert_eq!(
            one.metadata.name.as_deref(),
            Some(format!("{}.poolboy.dev.local", one.spec.names.plural).as_str())
        );
    }
    let watch = crds
        .iter()
        .find(|c| c.spec.names.kind == "ResourceWatch")
        .expect("ResourceWatch CRD");
    assert!(
        watch.spec.versions.iter().all(|v| v.subresources.is_none()),
        "Poolboy's ResourceWatch has no status subresource (Δ§2.2)"
    );
}

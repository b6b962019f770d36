//! Names Poolboy derives rather than stores: the handle "guid", the names of the handles the
//! broker creates, the default names of managed resources and ResourceWatch object names.
//!
//! Each must match Poolboy 1.17 exactly: existing handles, resources and ResourceWatch objects
//! are adopted by name.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE;
use rand::RngExt;
use sha2::{Digest, Sha256};

/// The `metadata.generateName` of every ResourceHandle (Poolboy 1.12 §3.2). The CRD pins handle
/// names to `^guid-[a-z0-9\-]*[a-z0-9]$`.
pub(crate) const HANDLE_GENERATE_NAME: &str = "guid-";

/// How many trailing characters make the guid of a handle whose name has no known prefix.
const GUID_FALLBACK_CHARS: usize = 5;

/// Length of the hash part of a ResourceWatch name (Poolboy 1.17 Δ§2.2).
const WATCH_HASH_CHARS: usize = 12;

/// The "guid" of a handle (Poolboy 1.12 §12.3 step 4): its name without its `generateName`
/// prefix when it has one, else without `guid-`, else its last five characters (the whole name
/// when it is shorter). It is the `guid` template variable and the tail of resource names.
pub(crate) fn handle_guid<'a>(name: &'a str, generate_name: Option<&str>) -> &'a str {
    // An empty generateName is no prefix (Python truthiness).
    if let Some(rest) = generate_name
        .filter(|prefix| !prefix.is_empty())
        .and_then(|prefix| name.strip_prefix(prefix))
    {
        return rest;
    }
    if let Some(rest) = name.strip_prefix(HANDLE_GENERATE_NAME) {
        return rest;
    }
    // Python's `name[-5:]` counts code points; slice on a char boundary.
    match name.char_indices().rev().nth(GUID_FALLBACK_CHARS - 1) {
        Some((start, _)) => &name[start..],
        None => name,
    }
}

/// The name of a managed resource whose template sets no `metadata.name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceName {
    /// `metadata.generateName`: the template's, else `guid<index>-`. Poolboy keeps it in the body
    /// (the API server ignores it when a name is given).
    pub generate_name: String,
    /// `metadata.name`: `generate_name` followed by the handle guid.
    pub name: String,
}

/// The characters the API server draws `generateName` suffixes from. Handle names the broker
/// picks itself use them too, so that they look like Poolboy's (`guid-` and five characters).
pub(crate) const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const NAME_SUFFIX_CHARS: usize = 5;

/// The name of the handle created for the claim with uid `claim_uid`: `guid-` and five
/// characters derived from the uid. Being derived, two operator processes creating a handle
/// for one claim at the same time create the same handle: the second gets 409 and adopts it
/// instead of making a twin.
pub(crate) fn claim_handle_name(claim_uid: &str) -> String {
    let digest = Sha256::digest(claim_uid.as_bytes());
    let suffix: String = digest
        .iter()
        .take(NAME_SUFFIX_CHARS)
        .map(|b| char::from(NAME_ALPHABET[usize::from(*b) % NAME_ALPHABET.len()]))
        .collect();
    format!("{HANDLE_GENERATE_NAME}{suffix}")
}

/// A random handle name, `guid-` and five characters, chosen before the create so that a pool
/// can reserve it in its status first (the API server would pick it only on create).
pub(crate) fn random_handle_name<R: rand::Rng + ?Sized>(rng: &mut R) -> String {
    let suffix: String = (0..NAME_SUFFIX_CHARS)
        .map(|_| char::from(NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())]))
        .collect();
    format!("{HANDLE_GENERATE_NAME}{suffix}")
}

/// Names resource `index` of a handle whose guid is `guid`, for a template without
/// `metadata.name` (Poolboy 1.12 §12.3 step 4). The per-index default prefix keeps the resources
/// of one handle apart; a template that sets its own prefix is trusted to avoid conflicts.
pub(crate) fn resource_name(
    template_generate_name: Option<&str>,
    index: usize,
    guid: &str,
) -> ResourceName {
    let generate_name = match template_generate_name {
        Some(prefix) => prefix.to_owned(),
        None => format!("guid{index}-"),
    };
    let name = format!("{generate_name}{guid}");
    ResourceName {
        generate_name,
        name,
    }
}

/// The name of the ResourceWatch for one watched kind in one namespace (cluster-wide when
/// `namespace` is `None` or empty), exactly as Poolboy 1.17 derives it (Δ§2.2):
/// `<namespace or "cluster">-<h>` with `h` the first 12 characters of the lowercased URL-safe
/// base64 of SHA-256(`"<apiVersion>:<kind>:<namespace or ''>"`), with `=`, `-` and `_` removed.
/// Concurrent creators converge on this name, and existing objects are adopted by it.
pub fn resource_watch_name(api_version: &str, kind: &str, namespace: Option<&str>) -> String {
    let namespace = namespace.filter(|ns| !ns.is_empty());
    let digest = Sha256::digest(format!("{api_version}:{kind}:{}", namespace.unwrap_or("")));
    let hash: String = URL_SAFE
        .encode(digest)
        .chars()
        .filter(|c| !matches!(c, '=' | '-' | '_'))
        .map(|c| c.to_ascii_lowercase())
        .take(WATCH_HASH_CHARS)
        .collect();
    format!("{}-{hash}", namespace.unwrap_or("cluster"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn guid_strips_the_generate_name_prefix() {
        assert_eq!(handle_guid("guid-abc12", Some("guid-")), "abc12");
        assert_eq!(handle_guid("mypool-x7k2p9", Some("mypool-")), "x7k2p9");
    }

    #[test]
    fn guid_falls_back_to_the_guid_prefix_when_generate_name_does_not_match() {
        assert_eq!(handle_guid("guid-tss01", None), "tss01");
        assert_eq!(handle_guid("guid-tss01", Some("other-")), "tss01");
        // An empty generateName is no prefix.
        assert_eq!(handle_guid("guid-longer-tail", Some("")), "longer-tail");
    }

    #[test]
    fn guid_falls_back_to_the_last_five_characters() {
        assert_eq!(handle_guid("handle-abcdefgh", None), "defgh");
        assert_eq!(handle_guid("abc", None), "abc");
        assert_eq!(handle_guid("", None), "");
        // Code points, not bytes: never splits a character.
        assert_eq!(handle_guid("ñandú-éèêëü", None), "éèêëü");
        assert_eq!(handle_guid("ü", Some("guid-")), "ü");
    }

    #[test]
    fn resource_names_default_to_an_indexed_guid_prefix() {
        assert_eq!(
            resource_name(None, 0, "abc12"),
            ResourceName {
                generate_name: "guid0-".into(),
                name: "guid0-abc12".into()
            }
        );
        assert_eq!(resource_name(None, 11, "abc12").name, "guid11-abc12");
    }

    #[test]
    fn resource_names_keep_the_template_prefix() {
        assert_eq!(
            resource_name(Some("vm-"), 2, "abc12"),
            ResourceName {
                generate_name: "vm-".into(),
                name: "vm-abc12".into()
            }
        );
        assert_eq!(resource_name(Some(""), 2, "abc12").name, "abc12");
    }

    // Known answers computed independently with python3 (hashlib.sha256, base64.urlsafe_b64encode)
    // exactly as Poolboy 1.17 resourcewatch.py does.
    #[test]
    fn resource_watch_names_match_poolboy() {
        assert_eq!(
            resource_watch_name(
                "anarchy.gpte.redhat.com/v1",
                "AnarchySubject",
                Some("babylon-anarchy")
            ),
            "babylon-anarchy-seguctpvv53f"
        );
        assert_eq!(
            resource_watch_name("v1", "ConfigMap", None),
            "cluster-yljzq96fcefa"
        );
        assert_eq!(
            resource_watch_name("v1", "ConfigMap", Some("")),
            "cluster-yljzq96fcefa"
        );
        assert_eq!(
            resource_watch_name("kubevirt.io/v1", "VirtualMachine", Some("user-ns-ü")),
            "user-ns-ü-mfi63imn0l9e"
        );
    }

    proptest! {
        #[test]
        fn guid_never_panics_and_is_a_suffix(name in ".{0,20}", prefix in proptest::option::of(".{0,6}")) {
            let guid = handle_guid(&name, prefix.as_deref());
            prop_assert!(name.ends_with(guid));
        }

        #[test]
        fn watch_names_have_a_twelve_character_lowercase_hash(
            api_version in "[a-z./0-9]{1,30}", kind in "[A-Za-z]{1,20}", ns in proptest::option::of("[a-z0-9-]{1,20}")
        ) {
            let name = resource_watch_name(&api_version, &kind, ns.as_deref());
            let (prefix, hash) = name.rsplit_once('-').unwrap();
            prop_assert_eq!(prefix, ns.as_deref().unwrap_or("cluster"));
            prop_assert_eq!(hash.len(), 12);
            prop_assert!(hash.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
        }

    }
}

//! JSON pointers (RFC 6901) and the JSON-patch ops built on them, from unescaped segments: the
//! one way this crate names a path, so a key holding `/` or `~` (an annotation such as
//! `poolboy.gpte.redhat.com/resource-handle-deleted`) is escaped, and no malformed pointer can
//! silently become the root.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, TestOperation};
use serde_json::Value;

/// The pointer made of `segments`, each escaped as RFC 6901 requires.
pub(crate) fn pointer(segments: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(segments.iter().copied())
}

/// An `add` op at the pointer made of `segments`.
pub(crate) fn add(segments: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: pointer(segments),
        value,
    })
}

/// A `test` op: the patch applies only while the value at `segments` is `value`.
pub(crate) fn test(segments: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Test(TestOperation {
        path: pointer(segments),
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_escaped() {
        let path = pointer(&["metadata", "annotations", "example.com/a~b"]);
        assert_eq!(path.as_str(), "/metadata/annotations/example.com~1a~0b");
    }

    #[test]
    fn no_segments_is_the_root() {
        assert_eq!(pointer(&[]).as_str(), "");
    }
}

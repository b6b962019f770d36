//! How a deleted handle's finalizer deletes a resource it made (B11). Poolboy annotates the
//! resource `D/resource-handle-deleted` first, so that whoever sees it while it is being
//! deleted (its own watch, B12, or anyone else) knows Poolboy deleted it. A resource that goes
//! at once is never seen being deleted, and needs no annotation: one request instead of two.

use serde_json::Value;

/// The way to delete one resource, from the copy last read of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Deletion<'a> {
    /// Annotate it, then delete it: it stays while its finalizers or grace period run, or
    /// the copy cannot tell.
    AnnotateFirst,
    /// Delete it while it is still this copy (a resourceVersion precondition), which has
    /// nothing that keeps an object once deleted.
    AtOnce {
        uid: &'a str,
        resource_version: &'a str,
    },
}

/// How `live`, the resource as last read, is deleted.
pub(crate) fn deletion(live: &Value) -> Deletion<'_> {
    let text = |path: &str| live.pointer(path).and_then(Value::as_str);
    let any = |path: &str| {
        live.pointer(path)
            .and_then(Value::as_array)
            .is_some_and(|items| !items.is_empty())
    };
    // Pods end gracefully; a namespace stays while its contents go (`spec.finalizers`).
    let lingers = live.pointer("/metadata/deletionTimestamp").is_some()
        || any("/metadata/finalizers")
        || any("/spec/finalizers")
        || (text("/apiVersion") == Some("v1") && text("/kind") == Some("Pod"));
    match (
        lingers,
        text("/metadata/uid"),
        text("/metadata/resourceVersion"),
    ) {
        (false, Some(uid), Some(resource_version)) => Deletion::AtOnce {
            uid,
            resource_version,
        },
        _ => Deletion::AnnotateFirst,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn configmap(metadata: Value) -> Value {
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"},
            "metadata": {"name": "guid-a", "namespace": "user", "uid": "u1",
                "resourceVersion": "42"}});
        if let (Some(into), Some(from)) = (object["metadata"].as_object_mut(), metadata.as_object())
        {
            into.extend(from.clone());
        }
        object
    }

    #[test]
    fn a_resource_with_nothing_to_keep_it_goes_at_once_while_unchanged() {
        assert_eq!(
            deletion(&configmap(json!({}))),
            Deletion::AtOnce {
                uid: "u1",
                resource_version: "42"
            }
        );
        assert_eq!(
            deletion(&configmap(json!({"finalizers": []}))),
            Deletion::AtOnce {
                uid: "u1",
                resource_version: "42"
            }
        );
    }

    #[test]
    fn a_resource_that_stays_once_deleted_is_annotated_first() {
        let finalized = configmap(json!({"finalizers": ["anarchy.gpte.redhat.com"]}));
        assert_eq!(deletion(&finalized), Deletion::AnnotateFirst);
        let deleting = configmap(json!({"deletionTimestamp": "2026-12-03T10:00:00Z"}));
        assert_eq!(deletion(&deleting), Deletion::AnnotateFirst);
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "lab", "uid": "u2", "resourceVersion": "7"},
            "spec": {"finalizers": ["kubernetes"]}});
        assert_eq!(deletion(&namespace), Deletion::AnnotateFirst);
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "user", "uid": "u3", "resourceVersion": "9"}});
        assert_eq!(deletion(&pod), Deletion::AnnotateFirst);
    }

    #[test]
    fn a_copy_without_uid_or_version_is_annotated_first() {
        let mut unversioned = configmap(json!({}));
        if let Some(metadata) = unversioned["metadata"].as_object_mut() {
            metadata.remove("resourceVersion");
        }
        assert_eq!(deletion(&unversioned), Deletion::AnnotateFirst);
        let mut without_uid = configmap(json!({}));
        if let Some(metadata) = without_uid["metadata"].as_object_mut() {
            metadata.remove("uid");
        }
        assert_eq!(deletion(&without_uid), Deletion::AnnotateFirst);
    }
}

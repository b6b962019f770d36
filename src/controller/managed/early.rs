//! The managed-resource watches a start needs, started as the handle watch lists the handles
//! that reference them rather than by the handles' first reconciles.
//!
//! A handle's reconcile reads its resources from their watch's store and waits for the
//! watch's first list (`stored_state`). Started by the first reconcile, a watch lists only
//! once the handles have listed, while every handle waits on it (a start over 100,000 claims
//! reconciled them 1.19 times each; 1.00 with the watch started from the list). Until the
//! handles have listed, the watch leaves them alone (`Router::suspect`, `Router::wake`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use futures::channel::mpsc;
use kube::runtime::watcher;

use super::{WatchKey, ensure_watch};
use crate::api::OperatorDomain;
use crate::api::kinds::HandleObject;
use crate::api::refs::ResourceReference;
use crate::controller::context::Context;
use crate::core::handle::definition::status_references;
use crate::store::shared_watch::SharedWatch;

/// The watches to start, in the order the handle watch first referenced them.
pub(crate) struct EarlyWatches {
    references: mpsc::UnboundedReceiver<ResourceReference>,
}

impl EarlyWatches {
    /// Follows `handles`: each watch key a handle's status references (one that `domain`
    /// leaves alone aside, B12) is sent once, with the first reference that named it.
    pub(crate) fn following(
        handles: &mut SharedWatch<HandleObject>,
        domain: OperatorDomain,
    ) -> Self {
        let (sender, references) = mpsc::unbounded();
        let seen = Mutex::new(NewKeys::default());
        handles.follow(move |event| {
            let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
            let (watcher::Event::Apply(handle) | watcher::Event::InitApply(handle)) = event else {
                if matches!(event, watcher::Event::InitDone) {
                    seen.listed();
                }
                return;
            };
            if domain.ignores(&handle.metadata) {
                return;
            }
            for reference in seen.of(handle) {
                // Closed only when the broker stops.
                let _ = sender.unbounded_send(reference);
            }
        });
        Self { references }
    }

    /// Starts each watch as its first reference comes, until the handle watch ends. A watch
    /// that cannot start is left to the reconciles, which report why.
    pub(crate) async fn run(mut self, ctx: Arc<Context>) {
        while let Some(reference) = self.references.next().await {
            if let Err(error) = ensure_watch(&ctx, &reference).await {
                tracing::debug!(%error, kind = %reference.kind, "cannot watch a managed resource yet");
            }
        }
    }
}

/// The watch keys handles referenced so far, until the handles have listed once: after that,
/// a handle's own reconcile starts the watches it reads (and starts again one that stopped
/// idle), and the keys are forgotten, so that they do not follow every namespace ever used.
#[derive(Default)]
struct NewKeys {
    keys: HashSet<WatchKey>,
    listed: bool,
}

impl NewKeys {
    /// The references of `handle`'s status whose watch key is new, while the handles list.
    fn of(&mut self, handle: &HandleObject) -> Vec<ResourceReference> {
        if self.listed {
            return Vec::new();
        }
        status_references(handle)
            .into_iter()
            .flatten()
            .filter(|reference| self.keys.insert(WatchKey::of(reference)))
            .collect()
    }

    /// The handles have listed once.
    fn listed(&mut self) {
        self.listed = true;
        self.keys = HashSet::new();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn handle(references: &[(&str, &str, Option<&str>)]) -> HandleObject {
        let resources: Vec<_> = references
            .iter()
            .map(|_| {
                json!({"provider": {
                    "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceProvider",
                    "name": "p", "namespace": "poolboy",
                }})
            })
            .collect();
        let status: Vec<_> = references
            .iter()
            .enumerate()
            .map(|(i, (kind, name, namespace))| {
                json!({"reference": {
                    "apiVersion": "v1", "kind": kind, "name": name, "namespace": namespace,
                }, "name": format!("r{i}")})
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1",
            "kind": "ResourceHandle",
            "metadata": {"name": "guid-abcde", "namespace": "poolboy"},
            "spec": {"resources": resources},
            "status": {"resources": status},
        }))
        .expect("a handle")
    }

    #[test]
    fn each_watch_key_is_new_once() {
        let mut keys = NewKeys::default();
        let first = keys.of(&handle(&[
            ("ConfigMap", "a", Some("one")),
            ("ConfigMap", "b", Some("one")),
        ]));
        assert_eq!(first.len(), 1, "two ConfigMaps of one namespace: one watch");
        assert_eq!(first[0].name, "a");
        let second = keys.of(&handle(&[
            ("ConfigMap", "c", Some("one")),
            ("ConfigMap", "d", Some("two")),
            ("Namespace", "e", None),
        ]));
        let names: Vec<_> = second.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["d", "e"]);
        assert!(keys.of(&handle(&[("Namespace", "f", None)])).is_empty());
    }

    /// Once the handles have listed, the reconciles start what they read: the keys go.
    #[test]
    fn the_keys_go_once_the_handles_have_listed() {
        let mut keys = NewKeys::default();
        assert_eq!(
            keys.of(&handle(&[("ConfigMap", "a", Some("one"))])).len(),
            1
        );
        keys.listed();
        assert!(keys.keys.is_empty());
        assert!(
            keys.of(&handle(&[("ConfigMap", "b", Some("two"))]))
                .is_empty()
        );
    }

    #[test]
    fn a_handle_without_references_starts_nothing() {
        let mut keys = NewKeys::default();
        assert!(keys.of(&handle(&[])).is_empty());
    }
}

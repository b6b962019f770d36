//! Managed resources whose handle is gone: a handle's finalizer deletes the
//! resources its status references, but a resource can still outlive it, e.g. one created by
//! a reconcile of another process that read the handle just before its deletion began. A
//! resource event whose handle is missing from the store, or being deleted, makes the resource
//! a suspect; once the API server confirms that its handle is gone (or replaced by a namesake
//! with another uid), the resource is deleted.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;

use crate::api::kinds::HandleObject;
use crate::controller::write;

/// How long a suspect waits before its handle is looked up: a handle created a moment ago may
/// not be in this process's store yet.
const GRACE: Duration = Duration::from_secs(5);
/// How often a handle being deleted is looked up again, and for how many times at most (its
/// finalizer normally ends within seconds; one stuck for longer is left to a later event).
const DELETING_POLL: Duration = Duration::from_secs(5);
const DELETING_POLLS: usize = 60;

/// A resource whose handle may be gone, as its annotations name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Suspect {
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) handle_name: String,
    /// Absent on resources made before handles recorded their uid.
    pub(crate) handle_uid: Option<String>,
}

/// What the API server says about a suspect's handle.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The handle exists and is not being deleted: the resource is its.
    Owned,
    /// The handle is being deleted: look again once its finalizer is done.
    Deleting,
    /// No such handle, or a namesake with another uid.
    Orphan,
}

/// The verdict on `suspect` given its handle as read from the API server.
pub(crate) fn verdict(suspect: &Suspect, handle: Option<&HandleObject>) -> Verdict {
    let Some(handle) = handle else {
        return Verdict::Orphan;
    };
    let same_handle = match (&suspect.handle_uid, &handle.metadata.uid) {
        (Some(expected), Some(actual)) => expected == actual,
        _ => true,
    };
    match (same_handle, handle.metadata.deletion_timestamp.is_some()) {
        (false, _) => Verdict::Orphan,
        (true, true) => Verdict::Deleting,
        (true, false) => Verdict::Owned,
    }
}

/// Checks suspects, one task each, never two for the same resource at once.
#[derive(Clone)]
pub(crate) struct Sweeper {
    client: kube::Client,
    handles: Api<HandleObject>,
    resource: ApiResource,
    in_flight: Arc<Mutex<HashSet<String>>>,
}

impl Sweeper {
    pub(crate) fn new(
        client: kube::Client,
        handles: Api<HandleObject>,
        resource: ApiResource,
    ) -> Self {
        Self {
            client,
            handles,
            resource,
            in_flight: Arc::default(),
        }
    }

    /// Starts checking `suspect` unless a check of it is under way.
    pub(crate) fn check(&self, suspect: Suspect) {
        let fresh = match self.in_flight.lock() {
            Ok(mut in_flight) => in_flight.insert(suspect.uid.clone()),
            Err(poisoned) => poisoned.into_inner().insert(suspect.uid.clone()),
        };
        if !fresh {
            return;
        }
        let sweeper = self.clone();
        tokio::spawn(async move {
            if let Err(error) = sweeper.sweep(&suspect).await {
                tracing::warn!(%error, resource = %suspect.name, handle = %suspect.handle_name,
                    "cannot check a managed resource whose handle may be gone");
            }
            match sweeper.in_flight.lock() {
                Ok(mut in_flight) => in_flight.remove(&suspect.uid),
                Err(poisoned) => poisoned.into_inner().remove(&suspect.uid),
            };
        });
    }

    async fn sweep(&self, suspect: &Suspect) -> Result<(), kube::Error> {
        tokio::time::sleep(GRACE).await;
        for _ in 0..DELETING_POLLS {
            let handle = self.handles.get_opt(&suspect.handle_name).await?;
            match verdict(suspect, handle.as_ref()) {
                Verdict::Owned => return Ok(()),
                Verdict::Deleting => tokio::time::sleep(DELETING_POLL).await,
                Verdict::Orphan => return self.delete_orphan(suspect).await,
            }
        }
        Ok(())
    }

    /// Deletes the resource itself (uid precondition: never a namesake made since).
    async fn delete_orphan(&self, suspect: &Suspect) -> Result<(), kube::Error> {
        let api: Api<DynamicObject> = match &suspect.namespace {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, &self.resource),
            None => Api::all_with(self.client.clone(), &self.resource),
        };
        tracing::info!(kind = %self.resource.kind, resource = %suspect.name,
            handle = %suspect.handle_name, "deleting a managed resource whose handle is gone");
        // Gone already, or a namesake (the uid precondition): either way not this one.
        write::delete_uid(&api, &suspect.name, Some(&suspect.uid)).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn suspect(handle_uid: Option<&str>) -> Suspect {
        Suspect {
            namespace: Some("user".into()),
            name: "cm".into(),
            uid: "r1".into(),
            handle_name: "guid-a".into(),
            handle_uid: handle_uid.map(str::to_owned),
        }
    }

    fn handle(uid: &str, deleting: bool) -> HandleObject {
        let mut metadata = json!({"name": "guid-a", "namespace": "poolboy", "uid": uid});
        if deleting {
            metadata["deletionTimestamp"] = json!("2026-11-24T10:00:00Z");
        }
        serde_json::from_value(json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceHandle",
            "metadata": metadata, "spec": {"resources": []},
        }))
        .expect("a handle")
    }

    #[test]
    fn a_resource_is_an_orphan_only_when_its_handle_is_gone_or_replaced() {
        assert_eq!(verdict(&suspect(Some("h1")), None), Verdict::Orphan);
        let live = handle("h1", false);
        assert_eq!(verdict(&suspect(Some("h1")), Some(&live)), Verdict::Owned);
        assert_eq!(verdict(&suspect(Some("h0")), Some(&live)), Verdict::Orphan);
        // Without a recorded uid, the name decides.
        assert_eq!(verdict(&suspect(None), Some(&live)), Verdict::Owned);
        let deleting = handle("h1", true);
        assert_eq!(
            verdict(&suspect(Some("h1")), Some(&deleting)),
            Verdict::Deleting
        );
        assert_eq!(
            verdict(&suspect(Some("h0")), Some(&deleting)),
            Verdict::Orphan
        );
    }
}

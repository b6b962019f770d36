//! Deleting an object only while the decision to delete it still holds: each delete carries
//! the uid and resourceVersion of the copy the decision was made on, and on a conflict the
//! object is read again and the decision made again. Pools use it for their spare handles,
//! claims for a handle they created and lost; either way, a handle bound meanwhile survives.

use kube::api::{Api, DeleteParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// How a guarded delete ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Deleted {
    /// This call deleted the object.
    Yes,
    /// The object is gone, or the decision no longer holds.
    No,
    /// The object changed on every attempt.
    Contended,
}

/// Deletes `object` while `still_wanted` holds for its current copy, trying up to `attempts`
/// times.
pub(crate) async fn delete_while<K>(
    api: &Api<K>,
    object: &K,
    attempts: usize,
    still_wanted: impl Fn(&K) -> bool,
) -> Result<Deleted, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let name = object.name_any();
    let mut current = object.clone();
    for _ in 0..attempts {
        if !still_wanted(&current) {
            return Ok(Deleted::No);
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: current.meta().resource_version.clone(),
                uid: current.meta().uid.clone(),
            }),
            ..Default::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => return Ok(Deleted::Yes),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Deleted::No),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                match api.get_opt(&name).await? {
                    Some(fresh) => current = fresh,
                    None => return Ok(Deleted::No),
                }
            }
            Err(error) => return Err(error),
        }
    }
    Ok(Deleted::Contended)
}

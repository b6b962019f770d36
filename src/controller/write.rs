//! The one write layer: every write the broker makes goes through here, and every write to an
//! object decided on from a read carries that read (a `test` of the resourceVersion or uid, a
//! resourceVersion in a merge patch, delete preconditions), so that a stale read fails instead
//! of undoing someone's change. Each write ends as one [`Written`]: done, conflict (recompute
//! from a fresh read, B06) or gone. Unguarded, and why: [`create`] (a taken name fails it) and
//! [`delete_named`] (an object known by its name alone). Finalizers (Δ§4.7) are added and
//! released here, for every kind.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use json_patch::{Patch as JsonPatch, PatchOperation, ReplaceOperation};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::echoes::{self, Writing};
use crate::api::OperatorDomain;
use crate::core::json::pointer::{add, pointer, test};
use crate::store::packed::Identified;

/// How a guarded write or delete ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Written<T> {
    Done(T),
    /// The object changed since it was read: recompute from a fresh read.
    Conflict,
    /// The object is gone (for a delete: gone already, or no longer the object the decision
    /// was made on).
    Gone,
}

/// Why a pass stopped before its end: a guarded write found its object changed (the shell
/// reads it again and starts over, B06), the object is gone, or an error.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Halt<E> {
    Conflict,
    Gone,
    Failed(E),
}

/// A controller's error, which a pass fails with besides a halt; a client error is one.
pub(crate) trait PassError: From<kube::Error> {}

impl<E: PassError> From<E> for Halt<E> {
    fn from(error: E) -> Self {
        Self::Failed(error)
    }
}

impl<E: PassError> From<kube::Error> for Halt<E> {
    fn from(error: kube::Error) -> Self {
        Self::Failed(error.into())
    }
}

/// A write to the object a pass is about, as a step of that pass: done, or the pass halts.
pub(crate) trait OrHalt<T, E> {
    fn or_halt<F: From<E>>(self) -> Result<T, Halt<F>>;
}

impl<T, E> OrHalt<T, E> for Result<Written<T>, E> {
    fn or_halt<F: From<E>>(self) -> Result<T, Halt<F>> {
        match self {
            Ok(Written::Done(value)) => Ok(value),
            Ok(Written::Conflict) => Err(Halt::Conflict),
            Ok(Written::Gone) => Err(Halt::Gone),
            Err(error) => Err(Halt::Failed(F::from(error))),
        }
    }
}

/// Whether an API error means "changed since read": 409 (a stale resourceVersion), or the
/// 422 the API server answers a JSON patch that no longer applies with (a failed `test`, a
/// path gone), which carries no field causes. A 422 with causes is an invalid write: an
/// error, reported as such, never retried as if it were a race.
pub(crate) fn is_conflict(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            let no_causes = status.details.as_ref().is_none_or(|d| d.causes.is_empty());
            status.code == 409 || (status.code == 422 && no_causes)
        }
        _ => false,
    }
}

pub(crate) fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Sorts the result of a guarded write into done, conflict and gone.
pub(crate) fn sort<T>(result: Result<T, kube::Error>) -> Result<Written<T>, kube::Error> {
    match result {
        Ok(value) => Ok(Written::Done(value)),
        Err(error) if is_conflict(&error) => Ok(Written::Conflict),
        Err(error) if is_not_found(&error) => Ok(Written::Gone),
        Err(error) => Err(error),
    }
}

/// What this process replaced with writes of its own, by uid. Process-wide, as the client
/// that writes is: every controller's reconciles consult it.
static REPLACED: LazyLock<Mutex<Replaced>> = LazyLock::new(Mutex::default);

/// Objects remembered at most; past it the memory starts afresh (it only saves work).
const REPLACED_AT_MOST: usize = 100_000;

/// How long a finalized object is remembered when its delete event came before the finalize
/// that caused it was recorded and no reconcile of it made the write (nothing else would
/// forget it).
const FINALIZED_FOR: Duration = Duration::from_secs(300);

#[derive(Default)]
struct Replaced {
    /// The version each object had when this process last wrote it.
    versions: HashMap<String, String>,
    /// Objects whose last finalizer this process released, with when: every copy of them is
    /// stale. A pass over one the store still shows (the finalize read a newer copy than the
    /// store had) would make again what the finalize deleted.
    finalized: HashMap<String, Instant>,
}

impl Replaced {
    fn forget(&mut self, uid: &str) {
        self.versions.remove(uid);
        self.finalized.remove(uid);
    }
}

fn replaced() -> MutexGuard<'static, Replaced> {
    REPLACED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether `object` is a version this process has replaced since with a write of its own, or
/// an object it finalized. A reconcile of it computes from a copy the store has not caught up
/// with, and its guarded writes conflict; skipping it is safe, since the write's own watch
/// event wakes the object again (otherwise half of a burst's handle reconciles conflict so).
pub(crate) fn is_replaced(object: &impl Identified) -> bool {
    let Some(uid) = object.uid() else {
        return false;
    };
    if replaced().finalized.contains_key(uid.as_ref()) {
        return true;
    }
    let stale = is_stale_copy(object);
    if stale {
        echoes::owe_pass(&uid);
    }
    stale
}

/// Whether `object` is a version this process has replaced since with a write of its own:
/// the store it came from has not caught up with that write's watch event yet.
pub(crate) fn is_stale_copy(object: &impl Identified) -> bool {
    let (Some(uid), Some(version)) = (object.uid(), object.resource_version()) else {
        return false;
    };
    let mut replaced = replaced();
    match replaced.versions.get(uid.as_ref()) {
        Some(old) if *old == version => true,
        // The store moved on: nothing to remember.
        Some(_) => {
            replaced.versions.remove(uid.as_ref());
            false
        }
        None => false,
    }
}

/// Forgets what this process replaced of `object`: it is gone, and the memory would otherwise
/// keep it until it fills up.
pub(crate) fn forget_replaced(object: &impl Identified) {
    if let Some(uid) = object.uid() {
        replaced().forget(&uid);
        echoes::forget(&uid);
    }
}

/// Remembers that this process released the last finalizer of object `uid`, which the API
/// server deletes then.
fn record_finalized(uid: &str) {
    let mut replaced = replaced();
    let now = Instant::now();
    replaced
        .finalized
        .retain(|_, at| now.duration_since(*at) < FINALIZED_FOR);
    replaced.versions.remove(uid);
    replaced.finalized.insert(uid.to_owned(), now);
}

/// Remembers that a write of this process, guarded by `finalizing`, released the last
/// finalizer of `object`, when that deleted it (`object` was deleting), unless its delete
/// event came before the write's answer: nothing would forget it then.
fn record_released<K: Resource, T>(object: &K, written: &Written<T>, finalizing: Option<&Writing>) {
    let meta = object.meta();
    if let (Written::Done(_), true, Some(uid)) = (
        written,
        meta.deletion_timestamp.is_some(),
        meta.uid.as_deref(),
    ) && !finalizing.is_some_and(Writing::deleted_meanwhile)
    {
        record_finalized(uid);
    }
}

/// Forgets each deleted object of a watch's events ([`forget_replaced`]): for the watches
/// kube-runtime's reflector keeps (a shared watch's followers use `follow_deletes`).
pub(crate) fn forget_deleted<K: Identified>(event: &kube::runtime::watcher::Event<K>) {
    if let kube::runtime::watcher::Event::Delete(object) = event {
        forget_replaced(object);
    }
}

/// Remembers that a write of this process replaced `before` (the copy the write was computed
/// from), when it went through, unless the object's delete event came before the write's
/// answer: it was forgotten then, and no event of it will come to replace the version.
fn record_replaced<K: Resource, T>(before: &K, written: &Written<T>, writing: Option<&Writing>) {
    let meta = before.meta();
    if let (Written::Done(_), Some(uid), Some(version)) = (
        written,
        meta.uid.as_deref(),
        meta.resource_version.as_deref(),
    ) {
        remember_replaced(uid, version, writing);
    }
}

/// Remembers that a write of this process, whose guard is `writing`, went through over the
/// managed resource `before` (its live object as a store had it): [`is_stale_copy`] until the
/// store catches up.
pub(crate) fn record_replaced_state(before: &Value, writing: Option<&Writing>) {
    if let (Some(uid), Some(version)) = (before.uid(), before.resource_version()) {
        remember_replaced(&uid, &version, writing);
    }
}

fn remember_replaced(uid: &str, version: &str, writing: Option<&Writing>) {
    if writing.is_some_and(Writing::deleted_meanwhile) {
        return;
    }
    let mut replaced = replaced();
    if replaced.versions.len() >= REPLACED_AT_MOST {
        replaced.versions.clear();
    }
    replaced.versions.insert(uid.to_owned(), version.to_owned());
}

/// `test /metadata/resourceVersion == <the version read>`: the patch applies only to the copy
/// it was computed from.
pub(crate) fn version_test<K: Resource>(object: &K) -> PatchOperation {
    test(
        &["metadata", "resourceVersion"],
        json!(object.meta().resource_version),
    )
}

/// The same guard for an object read as JSON (a managed resource); `None` when it carries no
/// resourceVersion.
pub(crate) fn version_test_of_json(object: &Value) -> Option<PatchOperation> {
    let version = object
        .pointer("/metadata/resourceVersion")
        .filter(|v| v.is_string())?;
    Some(test(&["metadata", "resourceVersion"], version.clone()))
}

/// The object, or its status subresource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Object,
    Status,
}

/// Sends `patch` to `target` of `name`, sorted by the one conflict rule. The patch must carry
/// its own guard; [`patch`] and [`merge`] add it.
pub(crate) async fn send<K, P>(
    api: &Api<K>,
    name: &str,
    target: Target,
    patch: &Patch<P>,
) -> Result<Written<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    P: Serialize + Debug,
{
    send_over(api, name, None::<&K>, target, patch, Echo::SpecKept).await
}

/// [`send`] of a patch computed from `before` (the patch carries its own guard): a write
/// that goes through replaced `before` ([`is_replaced`]).
pub(crate) async fn send_from<K, B, P>(
    api: &Api<K>,
    before: &B,
    target: Target,
    patch: &Patch<P>,
) -> Result<Written<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    B: Resource,
    P: Serialize + Debug,
{
    let name = before.name_any();
    send_over(api, &name, Some(before), target, patch, Echo::SpecKept).await
}

/// Which versions a reconcile writes of the object it is about are echoes (`echoes`): news
/// to no pass of it.
#[derive(Clone, Copy)]
enum Echo {
    /// Those that leave the spec as the pass knew it: a status write, or one that keeps the
    /// generation it was computed from. A pass that changed the spec gets the pass its echo
    /// brings, on the new spec.
    SpecKept,
    /// Every one: the pass goes on with the spec it wrote.
    Continued,
}

/// [`send`], for a write computed from `before`.
async fn send_over<K, B, P>(
    api: &Api<K>,
    name: &str,
    before: Option<&B>,
    target: Target,
    patch: &Patch<P>,
    echo: Echo,
) -> Result<Written<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    B: Resource,
    P: Serialize + Debug,
{
    let params = PatchParams::default();
    let writing = echoes::writing(name);
    let written = sort(match target {
        Target::Object => api.patch(name, &params, patch).await,
        Target::Status => api.patch_status(name, &params, patch).await,
    })?;
    if let Some(before) = before {
        record_replaced(before, &written, writing.as_ref());
    }
    if let (Some(writing), Written::Done(object)) = (&writing, &written) {
        let is_echo = match (echo, target, before) {
            (Echo::Continued, _, _) | (_, Target::Status, _) => true,
            (Echo::SpecKept, Target::Object, Some(before)) => {
                before.meta().generation == object.meta().generation
            }
            (Echo::SpecKept, Target::Object, None) => false,
        };
        if is_echo {
            writing.record(object);
        }
    }
    Ok(written)
}

/// Merge-patches the status of `name` in the collection at `url` with `patch` (which carries
/// its own resourceVersion guard), for an object kube cannot decode: the request goes out raw
/// and its answer is not decoded, since it would fail again.
pub(crate) async fn merge_status_raw(
    client: &kube::Client,
    url: &str,
    name: &str,
    patch: &Value,
) -> Result<Written<()>, kube::Error> {
    let request = kube::core::Request::new(url).patch_subresource(
        "status",
        name,
        &PatchParams::default(),
        &Patch::Merge(patch),
    );
    let request = request.map_err(kube::Error::BuildRequest)?;
    sort(client.request_text(request).await.map(drop))
}

/// JSON-patches `target` of `object` with `ops`, guarded by the resourceVersion read.
pub(crate) async fn patch<K>(
    api: &Api<K>,
    object: &K,
    target: Target,
    ops: Vec<PatchOperation>,
) -> Result<Written<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut guarded = Vec::with_capacity(ops.len() + 1);
    guarded.push(version_test(object));
    guarded.extend(ops);
    let patch = Patch::Json::<()>(JsonPatch(guarded));
    let name = object.name_any();
    send_over(api, &name, Some(object), target, &patch, Echo::SpecKept).await
}

/// Merge-patches `target` of `object` with `patch`, guarded by the resourceVersion read (the
/// API server answers 409 when it moved on).
pub(crate) async fn merge<K>(
    api: &Api<K>,
    object: &K,
    target: Target,
    patch: &Value,
) -> Result<Written<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    merge_over(api, object, target, patch, Echo::SpecKept).await
}

/// [`merge`] of `object` itself, a change of its spec that the pass writing it goes on with
/// (what it computed the change from resolves to the same once written): its echo brings
/// no pass.
pub(crate) async fn merge_continued<K>(
    api: &Api<K>,
    object: &K,
    patch: &Value,
) -> Result<Written<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    merge_over(api, object, Target::Object, patch, Echo::Continued).await
}

async fn merge_over<K>(
    api: &Api<K>,
    object: &K,
    target: Target,
    patch: &Value,
    echo: Echo,
) -> Result<Written<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut guarded = patch.clone();
    guarded["metadata"]["resourceVersion"] = json!(object.meta().resource_version);
    let name = object.name_any();
    let patch = Patch::Merge(&guarded);
    send_over(api, &name, Some(object), target, &patch, echo).await
}

/// Adds the operator's finalizer to an object that carries no Poolboy finalizer (Δ§4.7:
/// exactly one): one that some Poolboy mode put there (`D/handler` of its resource handlers)
/// stays the only one, so that Poolboy, started again in that mode, removes it. The object as
/// it is now.
pub(crate) async fn ensure_poolboy_finalizer<K>(
    api: &Api<K>,
    object: K,
    domain: &OperatorDomain,
) -> Result<Written<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if domain.carries_poolboy_finalizer(object.meta()) {
        return Ok(Written::Done(object));
    }
    let finalizer = domain.finalizer();
    let op = match object.meta().finalizers {
        Some(_) => add(&["metadata", "finalizers", "-"], json!(finalizer)),
        None => add(&["metadata", "finalizers"], json!([finalizer])),
    };
    patch(api, &object, Target::Object, vec![op]).await
}

/// Removes every finalizer `ours` claims (Δ§4.7: every Poolboy finalizer, of any domain
/// version), keeping the others.
pub(crate) async fn release_finalizers<K>(
    api: &Api<K>,
    object: &K,
    ours: impl Fn(&str) -> bool,
) -> Result<Written<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let current = object.finalizers();
    let kept: Vec<&String> = current.iter().filter(|f| !ours(f)).collect();
    if kept.len() == current.len() {
        return Ok(Written::Done(object.clone()));
    }
    let op = PatchOperation::Replace(ReplaceOperation {
        path: pointer(&["metadata", "finalizers"]),
        value: json!(kept),
    });
    // Held until the release is recorded: the object's delete event, which often comes
    // before the write's answer, then says so.
    let finalizing = echoes::writing(&object.name_any());
    let written = patch(api, object, Target::Object, vec![op]).await?;
    if kept.is_empty() {
        record_released(object, &written, finalizing.as_ref());
    }
    Ok(written)
}

/// Creates `object`. A create has nothing to guard: `Conflict` when an object of its name
/// exists already (409 AlreadyExists).
pub(crate) async fn create<K>(api: &Api<K>, object: &K) -> Result<Written<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(made) => Ok(Written::Done(made)),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Written::Conflict),
        Err(error) => Err(error),
    }
}

/// Deletes whatever object is called `name`, unguarded: it is known by its name alone (the
/// handle a deleted claim records, the claim a deleted handle is bound to), and any object of
/// that name is the one meant. `Done(Some(object))` while it is being deleted (its finalizers
/// run), `Done(None)` when it went at once, `Gone` when there was none.
pub(crate) async fn delete_named<K>(
    api: &Api<K>,
    name: &str,
) -> Result<Written<Option<K>>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    delete_with(api, name, &DeleteParams::default()).await
}

/// Deletes the object called `name` only while it is still the copy of `uid` at
/// `resource_version` (preconditions): `Done(Some(object))` while it is being deleted (its
/// finalizers run), `Done(None)` when it went at once, `Conflict` when it changed or was
/// replaced since that copy, `Gone` when there is none.
pub(crate) async fn delete_unchanged<K>(
    api: &Api<K>,
    name: &str,
    uid: &str,
    resource_version: &str,
) -> Result<Written<Option<K>>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: Some(resource_version.to_owned()),
        }),
        ..DeleteParams::default()
    };
    delete_with(api, name, &params).await
}

/// One delete, its answer sorted: the object while it is being deleted, `None` once gone
/// (some kinds answer an object that went at once with its last copy, which has no
/// deletionTimestamp, rather than a Status).
async fn delete_with<K>(
    api: &Api<K>,
    name: &str,
    params: &DeleteParams,
) -> Result<Written<Option<K>>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    Ok(match sort(api.delete(name, params).await)? {
        Written::Done(deleted) => Written::Done(
            deleted
                .left()
                .filter(|object| object.meta().deletion_timestamp.is_some()),
        ),
        Written::Conflict => Written::Conflict,
        Written::Gone => Written::Gone,
    })
}

/// Deletes the object called `name` if it is still the one of `uid` (a uid precondition);
/// `Gone` when it is gone, or a namesake took its place.
pub(crate) async fn delete_uid<K>(
    api: &Api<K>,
    name: &str,
    uid: Option<&str>,
) -> Result<Written<()>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let params = DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    Ok(match sort(api.delete(name, &params).await)? {
        Written::Done(_) => Written::Done(()),
        Written::Conflict | Written::Gone => Written::Gone,
    })
}

/// Deletes this very `object`, not a namesake created since it was read (uid precondition).
/// The API server answers a uid that no longer matches with 409: the object read is gone.
pub(crate) async fn delete_exact<K>(api: &Api<K>, object: &K) -> Result<Written<()>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    delete_uid(api, &object.name_any(), object.meta().uid.as_deref()).await
}

/// Deletes `object` only while the decision to delete it still holds: each delete carries the
/// uid and resourceVersion of the copy `still_wanted` approved, and on a conflict the object is
/// read again and the decision made again, up to `attempts` times. Pools use it for their spare
/// handles, claims for a handle they created and lost; either way, a handle bound meanwhile
/// survives. `Done` when this call deleted it, `Gone` when it is gone or no longer wanted,
/// `Conflict` when it changed on every attempt.
pub(crate) async fn delete_while<K>(
    api: &Api<K>,
    object: &K,
    attempts: usize,
    still_wanted: impl Fn(&K) -> bool,
) -> Result<Written<()>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let name = object.name_any();
    let mut current = object.clone();
    for _ in 0..attempts {
        if !still_wanted(&current) {
            return Ok(Written::Gone);
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: current.meta().resource_version.clone(),
                uid: current.meta().uid.clone(),
            }),
            ..DeleteParams::default()
        };
        match sort(api.delete(&name, &params).await)? {
            Written::Done(_) => return Ok(Written::Done(())),
            Written::Gone => return Ok(Written::Gone),
            Written::Conflict => match api.get_opt(&name).await? {
                Some(fresh) => current = fresh,
                None => return Ok(Written::Gone),
            },
        }
    }
    Ok(Written::Conflict)
}

#[cfg(test)]
mod tests {
    use kube::core::response::Status;

    use super::*;
    use crate::store::packed::Packed;

    /// Claim `uid` at `version`.
    fn claim(uid: &str, version: &str) -> crate::api::kinds::ClaimObject {
        serde_json::from_value(json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "user", "resourceVersion": version, "uid": uid},
            "spec": {},
        }))
        .expect("a claim")
    }

    /// A version this process replaced is skipped as its store keeps it, packed (uid and
    /// resourceVersion outside the metadata) or not; the next version is not.
    #[test]
    fn a_replaced_version_is_known_packed_or_not() {
        let claim = |version: &str| claim("7c1d2e3f-4a5b-4c6d-8e9f-a0b1c2d3e4f5", version);
        let before = claim("41");
        assert!(!is_replaced(&Packed::pack(&before)));
        record_replaced(&before, &Written::Done(()), None);
        assert!(is_replaced(&before));
        assert!(is_replaced(&Packed::pack(&before)));
        assert!(!is_replaced(&Packed::pack(&claim("42"))));
    }

    /// A deleted object is forgotten: the memory follows the live objects.
    #[test]
    fn a_deleted_object_is_forgotten() {
        let claim = claim("0d1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6", "7");
        record_replaced(&claim, &Written::Done(()), None);
        forget_deleted(&kube::runtime::watcher::Event::Apply(claim.clone()));
        assert!(is_replaced(&claim), "an update is not a deletion");
        forget_deleted(&kube::runtime::watcher::Event::Delete(claim.clone()));
        assert!(!is_replaced(&claim));
        let replaced = replaced();
        assert!(
            !replaced
                .versions
                .contains_key("0d1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6")
        );
    }

    /// A managed resource's copy a patch replaced is stale until the store shows a newer one,
    /// and forgotten with the resource's delete event.
    #[test]
    fn a_replaced_managed_resource_is_stale_until_its_store_moves_on_or_it_is_deleted() {
        let uid = "5c6d7e8f-9a0b-4c1d-8e2f-3a4b5c6d7e8f";
        let state = |version: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm", "uid": uid, "resourceVersion": version}})
        };
        record_replaced_state(&state("3"), None);
        assert!(is_stale_copy(&state("3")));
        assert!(is_stale_copy(&state("3")), "until the store moves on");
        assert!(!is_stale_copy(&state("4")));
        assert!(!is_stale_copy(&state("3")), "the store moved on: forgotten");

        record_replaced_state(&state("5"), None);
        let deleted: kube::api::DynamicObject =
            serde_json::from_value(state("6")).expect("a ConfigMap");
        forget_replaced(&deleted);
        assert!(!replaced().versions.contains_key(uid));
    }

    /// A write whose answer came after its object's delete event leaves nothing behind: no
    /// event of the object will come to replace what it would record.
    #[tokio::test]
    async fn an_object_deleted_before_its_writes_answer_is_not_remembered() {
        let uid = "2f3a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b";
        let claim = claim(uid, "12");
        let reconciled = Some((uid.to_owned(), "c".to_owned()));
        let writing = echoes::reconciling(reconciled, async { echoes::writing("c") })
            .await
            .expect("a write of the reconciled claim");
        forget_deleted(&kube::runtime::watcher::Event::Delete(claim.clone()));
        record_replaced(&claim, &Written::Done(()), Some(&writing));
        drop(writing);
        assert!(!replaced().versions.contains_key(uid));
    }

    /// The release of a deleting object's last finalizer is remembered until its delete
    /// event; not when that event came before the release's answer, nor for an object that
    /// was not deleting.
    #[tokio::test]
    async fn a_release_answered_after_the_delete_event_is_not_remembered() {
        let uid = "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d";
        let mut deleting = claim(uid, "20");
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        let reconciled = || Some((uid.to_owned(), "c".to_owned()));
        let finalizing = echoes::reconciling(reconciled(), async { echoes::writing("c") })
            .await
            .expect("a write of the reconciled claim");
        forget_deleted(&kube::runtime::watcher::Event::Delete(deleting.clone()));
        record_released(&deleting, &Written::Done(()), Some(&finalizing));
        drop(finalizing);
        assert!(!replaced().finalized.contains_key(uid), "deleted already");

        let finalizing = echoes::reconciling(reconciled(), async { echoes::writing("c") })
            .await
            .expect("a write of the reconciled claim");
        record_released(&claim(uid, "21"), &Written::Done(()), Some(&finalizing));
        assert!(!replaced().finalized.contains_key(uid), "not deleting");
        record_released(&deleting, &Written::Done(()), Some(&finalizing));
        drop(finalizing);
        assert!(
            replaced().finalized.contains_key(uid),
            "until its delete event"
        );
        forget_deleted(&kube::runtime::watcher::Event::Delete(deleting));
        assert!(!replaced().finalized.contains_key(uid));
    }

    /// An object whose last finalizer this process released is gone in every copy the store
    /// still shows, until its delete event; one whose delete event came first is forgotten
    /// after a while.
    #[test]
    fn a_finalized_object_is_stale_until_its_delete_event() {
        let claim = |version: &str| claim("5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b", version);
        record_finalized("5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b");
        assert!(is_replaced(&claim("3")), "an older copy");
        assert!(is_replaced(&claim("3")), "still");
        forget_deleted(&kube::runtime::watcher::Event::Delete(claim("4")));
        assert!(!is_replaced(&claim("3")));

        let long_ago = Instant::now()
            .checked_sub(FINALIZED_FOR)
            .expect("an instant");
        replaced()
            .finalized
            .insert("deleted-first".into(), long_ago);
        record_finalized("5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b");
        assert!(!replaced().finalized.contains_key("deleted-first"));
        forget_deleted(&kube::runtime::watcher::Event::Delete(claim("4")));
    }

    /// An API error as the API server sends it.
    fn api_error(status: Value) -> kube::Error {
        let status: Status = serde_json::from_value(status).expect("a Status");
        kube::Error::Api(Box::new(status))
    }

    fn failure(code: u16, reason: &str) -> kube::Error {
        api_error(json!({"status": "Failure", "reason": reason, "code": code, "message": "no"}))
    }

    /// What the API server answers a JSON patch whose `test` op failed.
    fn failed_test() -> kube::Error {
        api_error(json!({
            "status": "Failure",
            "message": "the server rejected our request due to an error in our request",
            "reason": "Invalid",
            "details": {},
            "code": 422,
        }))
    }

    /// What the API server answers a write that fails validation.
    fn invalid_write() -> kube::Error {
        api_error(json!({
            "status": "Failure",
            "message": "ResourceHandle.poolboy.gpte.redhat.com \"guid-a\" is invalid",
            "reason": "Invalid",
            "details": {
                "name": "guid-a",
                "kind": "ResourceHandle",
                "causes": [{
                    "reason": "FieldValueInvalid",
                    "message": "Invalid value: \"integer\": must be a string",
                    "field": "spec.lifespan.end",
                }],
            },
            "code": 422,
        }))
    }

    #[test]
    fn a_stale_resource_version_is_a_conflict() {
        assert!(is_conflict(&failure(409, "Conflict")));
    }

    #[test]
    fn a_failed_test_op_is_a_conflict() {
        assert!(is_conflict(&failed_test()));
    }

    /// An invalid write is an error, reported as such: taken for a conflict, it would be
    /// recomputed and sent again, and reported as contention.
    #[test]
    fn an_invalid_write_is_an_error_not_a_conflict() {
        assert!(!is_conflict(&invalid_write()));
        assert!(matches!(
            sort::<()>(Err(invalid_write())),
            Err(kube::Error::Api(status)) if status.code == 422
        ));
    }

    #[test]
    fn writes_sort_into_done_conflict_gone_and_errors() {
        assert_eq!(sort(Ok(1)).ok(), Some(Written::Done(1)));
        assert_eq!(sort::<()>(Err(failed_test())).ok(), Some(Written::Conflict));
        assert_eq!(
            sort::<()>(Err(failure(404, "NotFound"))).ok(),
            Some(Written::Gone)
        );
        assert!(sort::<()>(Err(failure(403, "Forbidden"))).is_err());
    }

    #[test]
    fn the_version_guard_of_json_needs_a_string_version() {
        let guarded = json!({"metadata": {"resourceVersion": "7"}});
        let op = version_test_of_json(&guarded).expect("a guard");
        assert_eq!(
            serde_json::to_value(op).ok(),
            Some(json!({"op": "test", "path": "/metadata/resourceVersion", "value": "7"}))
        );
        assert!(version_test_of_json(&json!({"metadata": {}})).is_none());
    }
}

//! The versions a reconcile wrote of the very object it reconciles: their watch events
//! ("echoes") bring nothing that reconcile did not already act on, so they wake nobody
//! ([`is_echo`], at each controller's own watch). A pass over an echo found nothing to do, and
//! cost a third of all passes. Triggers from other watches (a handle's change waking its
//! claim) are never filtered: only the object's own events are.
//!
//! One rule keeps this safe: a reconcile the shell skipped because the store still held a
//! copy this process replaced (`write::is_replaced`) is owed the pass the echo brings
//! ([`owe_pass`]), so that echo goes through.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::{Stream, StreamExt, future};
use kube::Resource;
use tokio::sync::Notify;

use crate::store::packed::Identified;

tokio::task_local! {
    /// The uid and name of the object the current reconcile is about.
    static RECONCILING: (String, String);
}

/// Echoes remembered per object: a pass writes its object a few times at most.
const PER_OBJECT: usize = 8;
/// Objects remembered at most; past it the memory starts afresh (it only saves passes).
const AT_MOST: usize = 100_000;
/// How long an event waits for the answer of a write of its object in flight, which may make
/// it an echo (the watch often delivers a write before the write's own answer is read).
const WAIT_AT_MOST: Duration = Duration::from_secs(1);
/// Events of a kind that wait so at once; past it, the kind's events wait their turn.
const WAITING_AT_MOST: usize = 256;

#[derive(Default)]
struct Echoes {
    /// The versions each object's own reconciles wrote, by uid, oldest first.
    versions: HashMap<String, Vec<String>>,
    /// The writes of each object by its own reconciles awaiting their answer, by uid.
    in_flight: HashMap<String, usize>,
    /// The objects deleted while a write of theirs awaited its answer (the write that released
    /// the last finalizer deletes its object, and the watch may tell before the answer comes):
    /// that answer is no echo to remember, since no event of the object will come to take it.
    gone: HashSet<String>,
}

static ECHOES: LazyLock<Mutex<Echoes>> = LazyLock::new(Mutex::default);
/// Told when a write in flight got its answer.
static ANSWERED: Notify = Notify::const_new();

fn echoes() -> MutexGuard<'static, Echoes> {
    ECHOES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `reconcile`, the reconcile of the object `uid` called `name`, so that its writes of
/// that object are known as echoes.
pub(crate) async fn reconciling<F: Future>(
    object: Option<(String, String)>,
    reconcile: F,
) -> F::Output {
    match object {
        Some(object) => RECONCILING.scope(object, reconcile).await,
        None => reconcile.await,
    }
}

/// A write of the object called `name`, when it is the one the current reconcile is about,
/// from before it is sent until its answer is [recorded](Writing::record).
pub(crate) fn writing(name: &str) -> Option<Writing> {
    let uid = RECONCILING
        .try_with(|(uid, reconciled)| (reconciled == name).then(|| uid.clone()))
        .ok()
        .flatten()?;
    Some(Writing::start(uid, true))
}

/// A write the current reconcile makes of an object it manages (a handle's resource): its
/// watch events are news to nobody (`resource_echo`).
pub(crate) fn writing_managed() -> Option<Writing> {
    let uid = RECONCILING.try_with(|(uid, _)| uid.clone()).ok()?;
    Some(Writing::start(uid, false))
}

/// A write of a reconcile in flight; the events it may cause wait for its answer.
pub(crate) struct Writing {
    /// The reconciled object's uid.
    uid: String,
    /// Whether it writes the reconciled object itself.
    own: bool,
}

impl Writing {
    fn start(uid: String, own: bool) -> Self {
        *echoes().in_flight.entry(uid.clone()).or_default() += 1;
        Self { uid, own }
    }

    /// Whether the reconciled object was deleted before this write's answer came: what the
    /// answer says of it would be kept for an object no event will come of.
    pub(crate) fn deleted_meanwhile(&self) -> bool {
        echoes().gone.contains(&self.uid)
    }

    /// Remembers `written`, as the write's answer has it (of the reconciled object's own
    /// writes, an object of the same name but another kind has another uid, and is no echo).
    pub(crate) fn record<K: Resource>(&self, written: &K) {
        let meta = written.meta();
        let (Some(uid), Some(version)) = (meta.uid.as_deref(), meta.resource_version.as_deref())
        else {
            return;
        };
        if self.own && uid != self.uid {
            return;
        }
        let mut echoes = echoes();
        if echoes.gone.contains(uid) {
            return;
        }
        if echoes.versions.len() >= AT_MOST && !echoes.versions.contains_key(uid) {
            echoes.versions.clear();
        }
        let versions = echoes.versions.entry(uid.to_owned()).or_default();
        if versions.len() >= PER_OBJECT {
            versions.remove(0);
        }
        versions.push(version.to_owned());
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        let mut echoes = echoes();
        if let Some(count) = echoes.in_flight.get_mut(&self.uid) {
            *count -= 1;
            if *count == 0 {
                echoes.in_flight.remove(&self.uid);
                echoes.gone.remove(&self.uid);
            }
        }
        drop(echoes);
        ANSWERED.notify_waiters();
    }
}

/// `items` (a controller's own watch events, most with an `object`) without the echoes.
/// An event of an object with a write in flight waits for that write's answer; the others
/// go on meanwhile (an event only names the object to reconcile, which is read from the
/// store: their order does not matter).
pub(crate) fn without_echoes<T, E, O>(
    items: impl Stream<Item = Result<T, E>> + Send + 'static,
    object: fn(&T) -> Option<&O>,
) -> impl Stream<Item = Result<T, E>> + Send + 'static
where
    T: Send + 'static,
    E: Send + 'static,
    O: Identified + 'static,
{
    items
        .map(move |item| {
            let id = item.as_ref().ok().and_then(object).and_then(id_of);
            async move {
                let echo = match id {
                    Some((uid, version)) => is_echo(uid.clone(), version, uid).await,
                    None => false,
                };
                (!echo).then_some(item)
            }
        })
        .buffer_unordered(WAITING_AT_MOST)
        .filter_map(future::ready)
}

/// Whether `object`, as its own watch delivers it, is the echo of a write its reconcile made,
/// once any write of it in flight has its answer. Each echo is let through once at most; any
/// other version forgets the object's echoes (the watch delivers versions in order: older
/// ones cannot come any more, and a later one is then let through, which only costs a pass).
/// The same for an object written by the reconciles of `writer`.
async fn is_echo(uid: String, version: String, writer: String) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT_AT_MOST;
    loop {
        let answered = ANSWERED.notified();
        tokio::pin!(answered);
        answered.as_mut().enable();
        if let Some(echo) = settle(&uid, &version, &writer, false) {
            return echo;
        }
        if tokio::time::timeout_at(deadline, answered).await.is_err() {
            return settle(&uid, &version, &writer, true).unwrap_or(false);
        }
    }
}

/// What an event of a resource the reconciles of `writer` (its handle's uid) manage means.
pub(crate) enum Heard {
    /// A write of the handle's own reconcile: news to nobody.
    Echo,
    News,
    /// A write of the handle's reconcile awaits its answer: the future says whether the
    /// event was its echo.
    Pending(futures::future::BoxFuture<'static, bool>),
}

/// Whether `resource`'s event, a change of a resource `writer`'s reconciles manage, is the
/// echo of their own write.
pub(crate) fn resource_echo<K: Resource>(resource: &K, writer: &str) -> Heard {
    let meta = resource.meta();
    let (Some(uid), Some(version)) = (meta.uid.clone(), meta.resource_version.clone()) else {
        return Heard::News;
    };
    match settle(&uid, &version, writer, false) {
        Some(true) => Heard::Echo,
        Some(false) => Heard::News,
        None => Heard::Pending(Box::pin(is_echo(uid, version, writer.to_owned()))),
    }
}

/// An object's uid and resourceVersion.
fn id_of(object: &impl Identified) -> Option<(String, String)> {
    let (uid, version) = object.uid().zip(object.resource_version())?;
    Some((uid.into_owned(), version.into_owned()))
}

/// Whether `version` of `uid` is an echo; `None` while a write of the reconciles of `writer`
/// is in flight (unless `waited` enough).
fn settle(uid: &str, version: &str, writer: &str, waited: bool) -> Option<bool> {
    let mut echoes = echoes();
    let at = echoes
        .versions
        .get(uid)
        .and_then(|versions| versions.iter().position(|v| v == version));
    if let Some(at) = at {
        if let Some(versions) = echoes.versions.get_mut(uid) {
            versions.drain(..=at);
            if versions.is_empty() {
                echoes.versions.remove(uid);
            }
        }
        return Some(true);
    }
    if echoes.in_flight.contains_key(writer) && !waited {
        return None;
    }
    echoes.versions.remove(uid);
    Some(false)
}

/// A reconcile of `uid` was skipped on a stale copy: the echoes to come wake the object.
pub(crate) fn owe_pass(uid: &str) {
    echoes().versions.remove(uid);
}

/// The object `uid` is gone; so is the answer of a write of it still in flight.
pub(crate) fn forget(uid: &str) {
    let mut echoes = echoes();
    echoes.versions.remove(uid);
    if echoes.in_flight.contains_key(uid) {
        echoes.gone.insert(uid.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::kinds::ClaimObject;
    use crate::store::packed::Packed;

    async fn echo(object: &impl Identified) -> bool {
        let (uid, version) = id_of(object).expect("a uid and a version");
        is_echo(uid.clone(), version, uid).await
    }

    fn claim(uid: &str, version: &str) -> ClaimObject {
        serde_json::from_value(json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "user", "resourceVersion": version, "uid": uid},
            "spec": {},
        }))
        .expect("a claim")
    }

    /// Writes `versions` of claim `uid` (called "c") from a reconcile of `reconciled`.
    async fn write(reconciled: (&str, &str), uid: &str, versions: &[&str]) {
        let object = (reconciled.0.to_owned(), reconciled.1.to_owned());
        reconciling(Some(object), async {
            for version in versions {
                if let Some(writing) = writing("c") {
                    writing.record(&claim(uid, version));
                }
            }
        })
        .await;
    }

    /// The versions a reconcile wrote of its own object are echoes, once each, packed or not.
    #[tokio::test]
    async fn a_reconciles_own_writes_are_echoes_once() {
        let uid = "5b1c0e7a-0d6e-4f57-9a51-6c3f0f1e2d01";
        write((uid, "c"), uid, &["11", "12"]).await;
        assert!(echo(&Packed::pack(&claim(uid, "11"))).await);
        assert!(echo(&claim(uid, "12")).await);
        assert!(
            !echo(&claim(uid, "12")).await,
            "an echo is let through once"
        );
        assert!(
            !echoes().versions.contains_key(uid),
            "nothing is kept after the last echo"
        );
    }

    /// A write to another object (a claim binding a handle; a resource of the same name) is
    /// not an echo: that object's controller must see it. Nor is any write outside a
    /// reconcile.
    #[tokio::test]
    async fn a_write_to_another_object_is_no_echo() {
        let (claim_uid, other_uid) = (
            "5b1c0e7a-0d6e-4f57-9a51-6c3f0f1e2d02",
            "5b1c0e7a-0d6e-4f57-9a51-6c3f0f1e2d03",
        );
        write((claim_uid, "c"), other_uid, &["21"]).await;
        write((claim_uid, "d"), claim_uid, &["22"]).await;
        assert!(writing("c").is_none(), "outside a reconcile");
        assert!(!echo(&claim(other_uid, "21")).await);
        assert!(!echo(&claim(claim_uid, "22")).await);
    }

    /// An event that comes while the write that made it awaits its answer waits for it.
    #[tokio::test]
    async fn an_echo_ahead_of_its_answer_waits_for_it() {
        let uid = "5b1c0e7a-0d6e-4f57-9a51-6c3f0f1e2d05";
        let object = (uid.to_owned(), "c".to_owned());
        let writing = reconciling(Some(object), async { writing("c") })
            .await
            .expect("a write of the reconciled object");
        let event = tokio::spawn(is_echo(uid.to_owned(), "51".to_owned(), uid.to_owned()));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!event.is_finished(), "it waits for the answer");
        writing.record(&claim(uid, "51"));
        drop(writing);
        assert!(event.await.expect("the check"));
        assert!(!echoes().in_flight.contains_key(uid));
    }

    /// Someone else's version forgets the echoes; a skipped reconcile (owed a pass) and a
    /// deletion do too.
    #[tokio::test]
    async fn a_foreign_version_a_skip_or_a_deletion_forgets_the_echoes() {
        let uid = "5b1c0e7a-0d6e-4f57-9a51-6c3f0f1e2d04";
        write((uid, "c"), uid, &["31"]).await;
        assert!(!echo(&claim(uid, "30")).await);
        assert!(
            !echo(&claim(uid, "31")).await,
            "forgotten at the foreign version"
        );
        write((uid, "c"), uid, &["32"]).await;
        owe_pass(uid);
        assert!(!echo(&claim(uid, "32")).await);
        write((uid, "c"), uid, &["33"]).await;
        forget(uid);
        assert!(!echoes().versions.contains_key(uid));
    }

    /// An object deleted while a write of it awaits its answer (the write released its last
    /// finalizer, and the watch told of the deletion first) keeps no echo: no event of it will
    /// come to take one, and the memory would hold it for good.
    #[tokio::test]
    async fn an_object_deleted_before_its_writes_answer_keeps_no_echo() {
        let uid = "5b1c0e7a-0d6e-4f57-9a51-6c3f0f1e2d08";
        let object = (uid.to_owned(), "c".to_owned());
        let writing = reconciling(Some(object), async { writing("c") })
            .await
            .expect("a write of the reconciled object");
        forget(uid);
        writing.record(&claim(uid, "81"));
        drop(writing);
        let echoes = echoes();
        assert!(!echoes.versions.contains_key(uid));
        assert!(!echoes.gone.contains(uid), "nothing is kept once answered");
    }

    /// A resource a handle's reconcile wrote is an echo to that handle only, once its write
    /// has its answer.
    #[tokio::test]
    async fn a_handles_write_of_its_resource_is_its_echo() {
        let (handle, resource) = (
            "5b1c0e7a-0d6e-4f57-9a51-6c3f0f1e2d06",
            "5b1c0e7a-0d6e-4f57-9a51-6c3f0f1e2d07",
        );
        let object = (handle.to_owned(), "guid-h".to_owned());
        let writing = reconciling(Some(object), async { writing_managed() })
            .await
            .expect("inside a reconcile");
        let Heard::Pending(pending) = resource_echo(&claim(resource, "61"), handle) else {
            panic!("its handle's write is in flight");
        };
        writing.record(&claim(resource, "61"));
        drop(writing);
        assert!(pending.await);
        assert!(matches!(
            resource_echo(&claim(resource, "62"), handle),
            Heard::News
        ));
    }
}

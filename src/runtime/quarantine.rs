//! The objects set aside because they cannot be decoded, as the client's
//! screening ([`super::client`]) finds them, and the task that reports them: one Warning
//! Event per object and problem, a `Valid` condition in the status of the broker's own kinds,
//! and the `poolboy_quarantined*` metrics. An object leaves quarantine when it decodes again,
//! is deleted, or is missing from a complete LIST of its collection.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::json;
use tokio::sync::Notify;

use crate::api::kinds::Kinds;
use crate::controller::write;
use crate::core::conditions::{UNDECODABLE, set_undecodable};
use crate::metrics::Metrics;
use crate::screening::request::CollectionRead;
use crate::screening::{ObjectName, Seen, SetAside};

/// The longest note an Event may carry (the API server refuses longer ones).
const MAX_NOTE_BYTES: usize = 1024;

/// An object of a collection.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    group: String,
    plural: String,
    object: ObjectName,
}

struct Entry {
    version: String,
    set_aside: SetAside,
    /// The (uid, generation, problem) last reported: the broker's own status write makes a
    /// new resourceVersion, which must not earn another Event.
    reported: Option<(Option<String>, Option<i64>, String)>,
}

impl Entry {
    fn report_key(&self) -> (Option<String>, Option<i64>, String) {
        let set_aside = &self.set_aside;
        (
            set_aside.uid.clone(),
            set_aside.generation,
            set_aside.problem.clone(),
        )
    }
}

#[derive(Default)]
struct Shared {
    objects: Mutex<BTreeMap<Key, Entry>>,
    changed: Notify,
}

/// The registry of objects set aside. Cheap to clone; the client's screening writes it, the
/// reporting task started by `runtime::run` reads it.
#[derive(Clone, Default)]
pub struct Quarantine {
    shared: Arc<Shared>,
}

impl Quarantine {
    fn objects_locked(&self) -> MutexGuard<'_, BTreeMap<Key, Entry>> {
        // A panic while holding the lock leaves a map that is still consistent.
        self.shared
            .objects
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The objects set aside now.
    pub fn objects(&self) -> Vec<SetAside> {
        self.objects_locked()
            .values()
            .map(|entry| entry.set_aside.clone())
            .collect()
    }

    /// Whether any object of `read`'s collection is set aside (the screening then names the
    /// decodable objects too, so that fixed ones leave).
    pub(crate) fn holds_any_of(&self, read: &CollectionRead) -> bool {
        self.objects_locked()
            .keys()
            .any(|key| key.group == read.group && key.plural == read.plural)
    }

    /// Records what a screened LIST (`complete` when it showed every object of its scope) or
    /// WATCH event of `read` found.
    pub(crate) fn record(&self, read: &CollectionRead, seen: Vec<Seen>, complete: bool) {
        let key = |object: ObjectName| Key {
            group: read.group.clone(),
            plural: read.plural.clone(),
            object,
        };
        let mut changed = false;
        let mut listed = BTreeSet::new();
        let mut objects = self.objects_locked();
        for seen in seen {
            match seen {
                Seen::SetAside(set_aside) => {
                    let key = key(set_aside.object.clone());
                    listed.insert(key.clone());
                    let version = read.version.clone();
                    let reported = objects.remove(&key).and_then(|entry| entry.reported);
                    objects.insert(
                        key,
                        Entry {
                            version,
                            set_aside,
                            reported,
                        },
                    );
                    changed = true;
                }
                Seen::Decodable(object) | Seen::Gone(object) => {
                    let key = key(object);
                    changed |= objects.remove(&key).is_some();
                    listed.insert(key);
                }
            }
        }
        if complete {
            let before = objects.len();
            objects.retain(|key, _| {
                let in_scope = key.group == read.group
                    && key.plural == read.plural
                    && (read.namespace.is_none() || read.namespace == key.object.namespace);
                !in_scope || listed.contains(key)
            });
            changed |= objects.len() != before;
        }
        drop(objects);
        if changed {
            self.shared.changed.notify_one();
        }
    }

    /// The objects not reported yet (marked reported now), and how many are set aside per
    /// kind.
    fn take_news(&self) -> (Vec<News>, BTreeMap<String, usize>) {
        let mut objects = self.objects_locked();
        let mut news = Vec::new();
        let mut counts = BTreeMap::new();
        for (key, entry) in objects.iter_mut() {
            *counts.entry(entry.set_aside.kind.clone()).or_default() += 1;
            let report_key = entry.report_key();
            if entry.reported.as_ref() != Some(&report_key) {
                entry.reported = Some(report_key);
                news.push(News {
                    group: key.group.clone(),
                    version: entry.version.clone(),
                    plural: key.plural.clone(),
                    set_aside: entry.set_aside.clone(),
                });
            }
        }
        (news, counts)
    }
}

/// An object set aside and not reported yet, with its collection.
struct News {
    group: String,
    version: String,
    plural: String,
    set_aside: SetAside,
}

impl News {
    /// The URL of the object's collection (in its namespace), without the object's name.
    fn collection_url(&self) -> String {
        let api = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match &self.set_aside.object.namespace {
            Some(namespace) => format!("{api}/namespaces/{namespace}/{}", self.plural),
            None => format!("{api}/{}", self.plural),
        }
    }
}

/// The plurals of the broker's kinds whose status has conditions.
pub(crate) struct WithConditions {
    group: String,
    plurals: BTreeSet<String>,
}

impl WithConditions {
    /// Every kind but ResourceWatch (Poolboy's, with a status of its own).
    pub(crate) fn of(kinds: &Kinds) -> Self {
        let plurals = [
            &kinds.claim,
            &kinds.handle,
            &kinds.pool,
            &kinds.provider,
            &kinds.scaling,
        ];
        Self {
            group: kinds.claim.group.clone(),
            plurals: plurals.iter().map(|r| r.plural.clone()).collect(),
        }
    }
}

/// Reports what the quarantine holds, each time it changes, until the process ends.
pub(crate) async fn report(
    quarantine: Quarantine,
    client: Client,
    reporter: Reporter,
    metrics: Arc<Metrics>,
    with_conditions: WithConditions,
) {
    let recorder = Recorder::new(client.clone(), reporter);
    let mut kinds_seen = BTreeSet::new();
    loop {
        quarantine.shared.changed.notified().await;
        let (news, counts) = quarantine.take_news();
        for news in news {
            let set_aside = &news.set_aside;
            tracing::warn!(
                kind = %set_aside.kind,
                namespace = set_aside.object.namespace.as_deref().unwrap_or(""),
                name = %set_aside.object.name,
                uid = set_aside.uid.as_deref().unwrap_or(""),
                resource_version = set_aside.resource_version.as_deref().unwrap_or(""),
                problem = %set_aside.problem,
                "object set aside: it cannot be decoded"
            );
            metrics.quarantine(&set_aside.kind);
            publish(&recorder, set_aside).await;
            if news.group == with_conditions.group && with_conditions.plurals.contains(&news.plural)
            {
                write_condition(&client, &news).await;
            }
        }
        kinds_seen.extend(counts.keys().cloned());
        for kind in &kinds_seen {
            metrics.set_quarantined(kind, counts.get(kind).copied().unwrap_or(0));
        }
    }
}

/// What the Event and the condition say.
fn note(set_aside: &SetAside) -> String {
    let mut note = format!(
        "{} cannot be decoded: {}. The broker ignores this object until it is fixed.",
        set_aside.kind, set_aside.problem
    );
    if note.len() > MAX_NOTE_BYTES {
        let mut end = MAX_NOTE_BYTES - '…'.len_utf8();
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push('…');
    }
    note
}

async fn publish(recorder: &Recorder, set_aside: &SetAside) {
    let reference = ObjectReference {
        api_version: Some(set_aside.api_version.clone()),
        kind: Some(set_aside.kind.clone()),
        name: Some(set_aside.object.name.clone()),
        namespace: set_aside.object.namespace.clone(),
        uid: set_aside.uid.clone(),
        resource_version: set_aside.resource_version.clone(),
        ..ObjectReference::default()
    };
    let event = Event {
        type_: EventType::Warning,
        reason: UNDECODABLE.to_owned(),
        note: Some(note(set_aside)),
        action: "Screen".to_owned(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &reference).await {
        tracing::warn!(%error, name = %set_aside.object.name, "cannot publish the Event of an object set aside");
    }
}

/// Sets `Valid` to False in the object's status, guarded by the resourceVersion that was set
/// aside. The request goes out raw and its answer is not decoded: it would fail again.
async fn write_condition(client: &Client, news: &News) {
    let set_aside = &news.set_aside;
    let mut conditions = set_aside.conditions.clone();
    let now = chrono::Utc::now();
    if !set_undecodable(&mut conditions, &note(set_aside), set_aside.generation, now).is_news() {
        return;
    }
    let patch = json!({
        "metadata": {"resourceVersion": set_aside.resource_version},
        "status": {"conditions": conditions},
    });
    let url = news.collection_url();
    // Conflict or gone: a newer version is on its way through the watch, and is screened in
    // turn.
    if let Err(error) = write::merge_status_raw(client, &url, &set_aside.object.name, &patch).await
    {
        tracing::warn!(
            %error,
            name = %set_aside.object.name,
            "cannot write the status of an object set aside"
        );
    }
}

//! Screening of the API server's collection responses before kube decodes them:
//! one object the broker cannot decode must not fail the LIST or WATCH of all the others.
//!
//! Each LIST item and WATCH event object loses its `metadata.managedFields` (no decision reads
//! them, and they are a large part of what kube would decode) and is checked on its bytes: its
//! nesting ([`depth`], within [`MAX_OBJECT_DEPTH`]) and, for the broker's own kinds, a trial
//! decode. A failing item leaves its LIST, a failing event becomes a DELETED event of a
//! tombstone, the rest passes as it came apart from its managed fields (docs/design.md,
//! "screening"). Pure: the tower layer that applies this, and the registry of what was set
//! aside, are in `runtime`.

pub(crate) mod depth;
pub(crate) mod list_pages;
mod managed_fields;
pub(crate) mod request;
mod scan;
#[cfg(test)]
mod tests;

pub(crate) use managed_fields::without_managed_fields;

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::core::Object;
use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

/// The deepest an object may nest: serde_json fails a document at 128 levels (it counts a
/// container when it enters it and fails when the count reaches 128), and kube decodes each
/// LIST item two levels down (`{"items": [item]}`), each WATCH object one. The tests pin both
/// envelopes at this depth and one past it.
pub(crate) const MAX_OBJECT_DEPTH: usize = 125;

/// How many segments of a path a report shows.
const SHOWN_SEGMENTS: usize = 12;

/// The trial decode an object of one of the broker's kinds must pass, and the empty spec its
/// tombstone carries.
#[derive(Clone, Copy)]
pub struct TypedDecode {
    trial: fn(&str) -> Result<(), serde_json::Error>,
    empty_spec: fn() -> Result<String, serde_json::Error>,
}

impl fmt::Debug for TypedDecode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedDecode").finish_non_exhaustive()
    }
}

impl TypedDecode {
    /// Objects decoded as `K`, a `kube::core::Object<Spec, Status>` as the controllers read
    /// them.
    pub fn of<K: ObjectType>() -> Self {
        Self {
            trial: trial::<K::Spec, K::Status>,
            empty_spec: empty_spec::<K::Spec>,
        }
    }
}

/// A typed object whose tombstone carries an empty spec.
pub trait ObjectType: DeserializeOwned {
    type Spec: DeserializeOwned + Serialize + Default;
    type Status: DeserializeOwned;
}

impl<P, U> ObjectType for Object<P, U>
where
    P: DeserializeOwned + Serialize + Default + Clone,
    U: DeserializeOwned + Default + Clone,
{
    type Spec = P;
    type Status = U;
}

/// What a trial decodes of an object: the members `kube::core::Object` reads as the kind's own
/// types, with its rules (a spec, a status that may be absent). Not its metadata: the API
/// server keeps the metadata of every object, custom or not, in the shape of `ObjectMeta`
/// (it decodes and encodes it as one), so it decodes wherever the object came from, and
/// decoding it twice would only cost a watch event's allocations again. Not `apiVersion` and
/// `kind` either: `Object` takes them as an optional `TypeMeta`, which fails no decode.
#[derive(Deserialize)]
struct Trial<P, U> {
    #[serde(rename = "spec")]
    _spec: P,
    #[serde(rename = "status")]
    _status: Option<U>,
}

fn trial<P: DeserializeOwned, U: DeserializeOwned>(json: &str) -> Result<(), serde_json::Error> {
    serde_json::from_str::<Trial<P, U>>(json).map(drop)
}

fn empty_spec<P: Serialize + Default>() -> Result<String, serde_json::Error> {
    serde_json::to_string(&P::default())
}

/// An object by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectName {
    pub namespace: Option<String>,
    pub name: String,
}

/// An object set aside: what it is, and what is wrong with it.
#[derive(Clone, Debug, PartialEq)]
pub struct SetAside {
    pub api_version: String,
    pub kind: String,
    pub object: ObjectName,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub generation: Option<i64>,
    /// Its `status.conditions`, as far as they decode (empty otherwise).
    pub conditions: Vec<Condition>,
    /// What is wrong, and where: "JSON nested deeper than 125 levels at /spec/…".
    pub problem: String,
}

/// What the screening learned about one object.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Seen {
    /// It decodes (reported only when asked for: it costs a parse of its metadata).
    Decodable(ObjectName),
    SetAside(SetAside),
    /// A DELETED event of an object that does not decode: it is gone.
    Gone(ObjectName),
}

/// A screened LIST body.
#[derive(Debug)]
pub struct ListScreen {
    /// The body without the items set aside; `None` when nothing was (pass the original).
    pub body: Option<String>,
    pub(crate) seen: Vec<Seen>,
    /// One page of several: more follow (`metadata.continue`).
    pub(crate) paged: bool,
}

/// What becomes of a WATCH event line.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    Keep,
    /// This line (ending in a newline) instead.
    Replace(String),
    Drop,
}

#[derive(Debug)]
pub(crate) struct EventScreen {
    pub line: Line,
    pub seen: Option<Seen>,
}

/// Screens the LIST body `body`; `None` when it is not a list (it then passes untouched,
/// and kube reports whatever is wrong with it). `decode` is the trial decode of the kind, if
/// it is one of the broker's; `names` asks for the names of the decodable items too.
pub fn screen_list(body: &str, decode: Option<TypedDecode>, names: bool) -> Option<ListScreen> {
    let members: Members = serde_json::from_str(body).ok()?;
    let items = members.get("items")?;
    let items: Vec<&RawValue> = serde_json::from_str(items.get()).ok()?;
    let envelope = Envelope {
        api_version: members.string("apiVersion"),
        kind: members
            .string("kind")
            .map(|kind| kind.strip_suffix("List").unwrap_or(&kind).to_owned()),
    };
    let paged = members
        .get("metadata")
        .and_then(|m| serde_json::from_str::<ListMetaHead>(m.get()).ok())
        .and_then(|m| m.continue_)
        .is_some_and(|c| !c.is_empty());
    let mut seen = Vec::new();
    // The kept items are written as they are screened into the one array the body gets: a
    // page is megabytes, and each copy of it held at once adds to a start's peak memory.
    let mut kept = String::with_capacity(items.iter().map(|item| item.get().len() + 1).sum());
    kept.push('[');
    let mut rewritten = false;
    for item in items {
        let item = match without_managed_fields(item.get()) {
            Some(stripped) => {
                rewritten = true;
                Cow::Owned(stripped)
            }
            None => Cow::Borrowed(item.get()),
        };
        match problem(&item, decode) {
            None => {
                if names {
                    seen.push(Seen::Decodable(Head::of(&item).name()));
                }
                if kept.len() > 1 {
                    kept.push(',');
                }
                kept.push_str(&item);
            }
            Some(problem) => {
                rewritten = true;
                let head = Head::of(&item);
                seen.push(Seen::SetAside(head.set_aside(&envelope, problem)));
            }
        }
    }
    kept.push(']');
    let body = rewritten.then(|| members.write_with("items", &kept));
    Some(ListScreen { body, seen, paged })
}

/// Screens one WATCH event line (without its newline).
pub(crate) fn screen_event(line: &str, decode: Option<TypedDecode>, names: bool) -> EventScreen {
    let keep = EventScreen {
        line: Line::Keep,
        seen: None,
    };
    let Ok(event) = serde_json::from_str::<EventHead>(line) else {
        return keep;
    };
    let deleted = match event.type_.as_ref() {
        "ADDED" | "MODIFIED" => false,
        "DELETED" => true,
        // BOOKMARK and ERROR carry no object of the kind.
        _ => return keep,
    };
    let stripped = without_managed_fields(event.object.get());
    let object = stripped.as_deref().unwrap_or(event.object.get());
    let Some(problem) = problem(object, decode) else {
        let seen = names.then(|| Seen::Decodable(Head::of(object).name()));
        let line = match stripped {
            // The type is one of the three above: plain ASCII, nothing to escape.
            Some(object) => Line::Replace(format!(
                "{{\"type\":\"{}\",\"object\":{object}}}\n",
                event.type_
            )),
            None => Line::Keep,
        };
        return EventScreen { line, seen };
    };
    let head = Head::of(object);
    let envelope = Envelope::default();
    let line = match tombstone(&head, &envelope, decode) {
        Some(tombstone) => {
            Line::Replace(format!(r#"{{"type":"DELETED","object":{tombstone}}}"#) + "\n")
        }
        None => Line::Drop,
    };
    let seen = if deleted {
        Seen::Gone(head.name())
    } else {
        Seen::SetAside(head.set_aside(&envelope, problem))
    };
    EventScreen {
        line,
        seen: Some(seen),
    }
}

/// What is wrong with `object`, if anything.
fn problem(object: &str, decode: Option<TypedDecode>) -> Option<String> {
    let bytes = object.as_bytes();
    if depth::exceeds(bytes, MAX_OBJECT_DEPTH) {
        let at = depth::too_deep_at(bytes, MAX_OBJECT_DEPTH)
            .map(|path| depth::pointer(&path, SHOWN_SEGMENTS))
            .unwrap_or_default();
        return Some(format!(
            "JSON nested deeper than {MAX_OBJECT_DEPTH} levels at {at}"
        ));
    }
    let error = (decode?.trial)(object).err()?;
    let offset = byte_offset(object, error.line(), error.column());
    let at = depth::pointer(&depth::path_at(bytes, offset), SHOWN_SEGMENTS);
    Some(format!("{} at {at}", error_message(&error)))
}

/// serde_json's message without its " at line L column C" (a position in the item, which
/// means nothing to the reader of a report; the path says where).
fn error_message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    text.strip_suffix(&position).unwrap_or(&text).to_owned()
}

/// The byte offset of serde_json's `line` and `column` (both 1-based) in `text`.
fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let line_start = text
        .match_indices('\n')
        .nth(line.saturating_sub(2))
        .filter(|_| line > 1)
        .map_or(0, |(at, _)| at + 1);
    (line_start + column.saturating_sub(1)).min(text.len())
}

/// The decodable stand-in of a deleted or set-aside object: its metadata (already without
/// `managedFields`, [`without_managed_fields`]) and an empty spec; only name and namespace when
/// even that does not decode. `None` if nothing decodes.
fn tombstone(head: &Head, envelope: &Envelope, decode: Option<TypedDecode>) -> Option<String> {
    let api_version = serde_json::to_string(&head.api_version(envelope)).ok()?;
    let kind = serde_json::to_string(&head.kind(envelope)).ok()?;
    let spec = match decode {
        Some(decode) => Some((decode.empty_spec)().ok()?),
        None => None,
    };
    let full = head.metadata.map(|m| m.get().to_owned());
    let minimal = serde_json::to_string(&MinimalMeta::from(&head.meta)).ok()?;
    [full, Some(minimal)]
        .into_iter()
        .flatten()
        .find_map(|metadata| {
            let mut tombstone =
                format!(r#"{{"apiVersion":{api_version},"kind":{kind},"metadata":{metadata}"#);
            if let Some(spec) = &spec {
                tombstone.push_str(&format!(r#","spec":{spec}"#));
            }
            tombstone.push('}');
            let decodes = problem(&tombstone, decode).is_none();
            decodes.then_some(tombstone)
        })
}

/// The type of the LIST an item came in (a LIST of a built-in kind does not repeat it in its
/// items).
#[derive(Default)]
struct Envelope {
    api_version: Option<String>,
    kind: Option<String>,
}

/// What a report needs of an object, read without decoding the rest.
struct Head<'a> {
    api_version: Option<String>,
    kind: Option<String>,
    metadata: Option<&'a RawValue>,
    meta: MetaHead,
    conditions: Vec<Condition>,
}

#[derive(Deserialize)]
struct HeadFields<'a> {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(borrow)]
    metadata: Option<&'a RawValue>,
    #[serde(borrow)]
    status: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct MetaHead {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MinimalMeta<'a> {
    name: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: &'a Option<String>,
}

impl<'a> From<&'a MetaHead> for MinimalMeta<'a> {
    fn from(meta: &'a MetaHead) -> Self {
        Self {
            name: &meta.name,
            namespace: &meta.namespace,
            uid: &meta.uid,
            resource_version: &meta.resource_version,
        }
    }
}

#[derive(Deserialize)]
struct ListMetaHead {
    #[serde(rename = "continue")]
    continue_: Option<String>,
}

#[derive(Deserialize)]
struct StatusHead<'a> {
    #[serde(borrow)]
    conditions: Option<&'a RawValue>,
}

/// Conditions are flat (`metav1.Condition`); anything deeper is not worth decoding.
const MAX_CONDITIONS_DEPTH: usize = 3;

impl<'a> Head<'a> {
    /// Every field serde skips here it skips without recursion; what it decodes is flat.
    fn of(object: &'a str) -> Self {
        let fields = serde_json::from_str::<HeadFields>(object).ok();
        let meta = fields
            .as_ref()
            .and_then(|f| f.metadata)
            .and_then(|m| serde_json::from_str::<MetaHead>(m.get()).ok())
            .unwrap_or_default();
        let conditions = fields
            .as_ref()
            .and_then(|f| f.status)
            .and_then(|s| serde_json::from_str::<StatusHead>(s.get()).ok())
            .and_then(|s| s.conditions)
            .filter(|c| !depth::exceeds(c.get().as_bytes(), MAX_CONDITIONS_DEPTH))
            .and_then(|c| serde_json::from_str::<Vec<Condition>>(c.get()).ok())
            .unwrap_or_default();
        match fields {
            Some(fields) => Self {
                api_version: fields.api_version,
                kind: fields.kind,
                metadata: fields.metadata,
                meta,
                conditions,
            },
            None => Self {
                api_version: None,
                kind: None,
                metadata: None,
                meta,
                conditions,
            },
        }
    }

    fn name(&self) -> ObjectName {
        ObjectName {
            namespace: self.meta.namespace.clone(),
            name: self.meta.name.clone().unwrap_or_default(),
        }
    }

    fn api_version(&self, envelope: &Envelope) -> String {
        self.api_version
            .clone()
            .or_else(|| envelope.api_version.clone())
            .unwrap_or_default()
    }

    fn kind(&self, envelope: &Envelope) -> String {
        self.kind
            .clone()
            .or_else(|| envelope.kind.clone())
            .unwrap_or_default()
    }

    fn set_aside(self, envelope: &Envelope, problem: String) -> SetAside {
        SetAside {
            api_version: self.api_version(envelope),
            kind: self.kind(envelope),
            object: self.name(),
            uid: self.meta.uid,
            resource_version: self.meta.resource_version,
            generation: self.meta.generation,
            conditions: self.conditions,
            problem,
        }
    }
}

#[derive(Deserialize)]
struct EventHead<'a> {
    #[serde(rename = "type", borrow)]
    type_: Cow<'a, str>,
    #[serde(borrow)]
    object: &'a RawValue,
}

/// The members of a JSON object, in order, their values captured unparsed.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'a> Members<'a> {
    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    fn string(&self, key: &str) -> Option<String> {
        serde_json::from_str(self.get(key)?.get()).ok()
    }

    /// The object again, with member `key`'s value replaced by `value`.
    fn write_with(&self, key: &str, value: &str) -> String {
        // Room for every member as it came (a list's items are megabytes: growing by doubling
        // would copy them, both copies held at once).
        let room: usize = self
            .0
            .iter()
            .map(|(k, v)| k.len() + v.get().len() + 4)
            .sum();
        let mut out = String::with_capacity(room + 2);
        out.push('{');
        for (k, v) in &self.0 {
            if out.len() > 1 {
                out.push(',');
            }
            // A String always serialises.
            out.push_str(&serde_json::to_string(k).unwrap_or_default());
            out.push(':');
            out.push_str(if k == key { value } else { v.get() });
        }
        out.push('}');
        out
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for MembersVisitor<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Members<'a>, M::Error> {
                let mut members = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    members.push((key, value));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor(std::marker::PhantomData))
    }
}

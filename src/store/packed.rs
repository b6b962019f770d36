//! Objects as a long-lived store keeps them packed: the metadata that names and filters them,
//! and the whole object as compact JSON, compressed, decoded by whoever reads it.
//!
//! Every claim sits in its store for the broker's whole life, read by one reconcile at a time:
//! kept parsed, the stores are most of the broker's memory at 100,000 claims, and a decode takes
//! microseconds. Each object is compressed with zstd on its own, against a dictionary its store
//! learns from its first objects ([`Packer`]). The newest changes a watch brings wait
//! uncompressed, up to [`PLAIN_BYTES`] a store: most are replaced within a second, and
//! compressing them would go for nothing. Measurements: docs/design.md, "store::packed".

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use kube::Resource;
use kube::api::{DynamicObject, ObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use zstd::zstd_safe::{self, CCtx, CDict, DCtx};

use crate::api::kinds::{ClaimObject, HandleObject, SharedType};

/// A claim as the claim store keeps it: packed ([`Packed`]), decoded by its reader.
pub(crate) type StoredClaim = Packed<ClaimObject>;

/// A handle as the handle store keeps it: packed, like claims (the free ones are also kept
/// parsed, `store::free_handles`).
pub(crate) type StoredHandle = Packed<HandleObject>;

/// A managed resource as its watch's store keeps it: packed, with only its [`Names`] beside
/// the JSON (no controller of the broker is driven by these stores, so nothing needs them to be
/// a `Resource` with its `ObjectMeta`).
pub(crate) type StoredResource = Packed<DynamicObject, Names>;

/// A store packs every object each watch event brings. Measured in a loop on claims and
/// handles as Poolboy writes them (1.6 KB of JSON each, a 16 KiB dictionary): level 1 takes
/// 2.7 µs an object for 107 bytes; the negative levels save at most 0.5 µs for 15–30 % more.
const LEVEL: i32 = 1;

/// The bytes of JSON a store's dictionary holds: several objects of a kind, small enough to
/// cost little beside the store (with zstd's tables for it, 79 KiB; [`Dictionary`]).
const DICTIONARY_BYTES: usize = 16 * 1024;

/// A store samples one of this many of its first objects for its dictionary: a start lists
/// objects by namespace and name, and the dictionary should cover more than the first
/// namespace's.
const SAMPLE_EVERY: usize = 4;

/// The bytes of JSON a store keeps uncompressed, of the objects its watch changed last
/// ([`Packer::pack_changed`]): about a second of `make soak`'s claims (6 a second, each
/// changed about five times, 2 KB each), over which a claim's bind or deletion has replaced
/// each version but the last.
const PLAIN_BYTES: usize = 64 * 1024;

/// Why a packed object does not unpack.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UnpackError {
    #[error("cannot decompress a packed object: {0}")]
    Decompress(&'static str),
    #[error("cannot decode a packed object: {0}")]
    Decode(#[from] serde_json::Error),
}

/// Why an object cannot be packed (short of memory, nothing else gets here).
#[derive(Debug, thiserror::Error)]
enum PackError {
    #[error("cannot compress the object: {0}")]
    Compress(&'static str),
}

/// What the objects of one kind mostly repeat, as a zstd raw-content dictionary: the JSON of
/// some of the first objects its store packed. Shared by every object compressed against it.
///
/// Compression goes through the tables zstd prepares from it once (63 KiB, against 6 µs an
/// object for preparing them each time instead of 1.7). Decompression reads the content alone:
/// a raw-content dictionary is only the window a frame's matches point into, so zstd's
/// decompression tables for it (a `DDict`, 43 KiB a store) make no decompression faster
/// (0.21 against 0.23 µs for a claim, measured in a loop).
pub(crate) struct Dictionary {
    content: Box<[u8]>,
    compress: CDict<'static>,
}

impl Dictionary {
    /// `None` when zstd cannot allocate its tables.
    fn of(content: Vec<u8>) -> Option<Self> {
        Some(Self {
            compress: CDict::try_create(&content, LEVEL)?,
            content: content.into_boxed_slice(),
        })
    }
}

/// Packs the objects of one store, and learns the store's [`Dictionary`] from the first ones.
/// A store's objects packed before it has one keep none. Objects that a watch changed are
/// packed plain, and compressed once [`PLAIN_BYTES`] of newer ones came
/// ([`Packer::compress_older`]).
pub(crate) struct Packer<K, H = ObjectMeta>
where
    Packed<K, H>: reflector::Lookup,
{
    learning: Learning,
    /// The objects packed plain, oldest first.
    plain: VecDeque<PlainObject<Packed<K, H>>>,
    /// The bytes of JSON of those objects.
    plain_bytes: usize,
    /// The store's type, which its keys carry.
    kind: <Packed<K, H> as reflector::Lookup>::DynamicType,
}

/// An object a store got plain: its key, the version, and the bytes of its JSON.
struct PlainObject<S: reflector::Lookup> {
    key: ObjectRef<S>,
    identity: Identity,
    bytes: usize,
}

enum Learning {
    /// The JSON sampled so far, and how many objects were packed.
    Sampling {
        content: Vec<u8>,
        packed: usize,
    },
    Learnt(Arc<Dictionary>),
    /// zstd could not allocate the dictionary's tables: the store packs without one.
    Failed,
}

impl Default for Learning {
    fn default() -> Self {
        Self::Sampling {
            content: Vec::new(),
            packed: 0,
        }
    }
}

impl<K: Resource + Serialize, H: Head> Packer<K, H>
where
    Packed<K, H>: reflector::Lookup,
    <Packed<K, H> as reflector::Lookup>::DynamicType: Eq + Hash + Clone,
{
    /// The packer of the store whose keys carry `kind`.
    pub(crate) fn new(kind: <Packed<K, H> as reflector::Lookup>::DynamicType) -> Self {
        Self {
            learning: Learning::default(),
            plain: VecDeque::new(),
            plain_bytes: 0,
            kind,
        }
    }

    /// `object`, which a list brought, compressed against the store's dictionary once it has
    /// one: most of a list's objects stay as they are for long.
    pub(crate) fn pack_listed(&mut self, object: &K) -> Packed<K, H> {
        // The dictionary as it was before this object: sampling it may complete one.
        let dictionary = self.dictionary();
        match self.sampled_json(object) {
            Some(json) => Packed::of_json(object, &json, dictionary),
            None => Packed::empty(object),
        }
    }

    /// `object`, which its watch changed, packed plain: [`Packer::compress_older`] compresses
    /// it once [`PLAIN_BYTES`] of newer changes came, unless one of them replaced it.
    pub(crate) fn pack_changed(&mut self, object: &K) -> Packed<K, H> {
        let Some(json) = self.sampled_json(object) else {
            return Packed::empty(object);
        };
        let bytes = json.len();
        let packed = Packed::plain(object, json);
        self.plain.push_back(PlainObject {
            key: reflector::Lookup::to_object_ref(&packed, self.kind.clone()),
            identity: packed.identity.clone(),
            bytes,
        });
        self.plain_bytes += bytes;
        packed
    }

    /// The objects of `store` packed plain before the newest [`PLAIN_BYTES`] of changes,
    /// compressed: what `store` is to keep of them instead. One the store no longer has as it
    /// was packed (changed again, or deleted) is left to what replaced it.
    pub(crate) fn compress_older(&mut self, store: &Store<Packed<K, H>>) -> Vec<Packed<K, H>> {
        let mut compressed = Vec::new();
        while self.plain_bytes > PLAIN_BYTES
            && let Some(oldest) = self.plain.pop_front()
        {
            self.plain_bytes -= oldest.bytes;
            let Some(stored) = store.get(&oldest.key) else {
                continue;
            };
            if stored.identity == oldest.identity
                && let Some(packed) = stored.compressed(self.dictionary())
            {
                compressed.push(packed);
            }
        }
        compressed
    }

    /// `object` as compact JSON, sampled for the dictionary; `None` when it does not encode
    /// ([`Packed::encode`]).
    fn sampled_json(&mut self, object: &K) -> Option<Vec<u8>> {
        let json = Packed::<K, H>::encode(object)?;
        self.sample(&json);
        Some(json)
    }

    fn dictionary(&self) -> Option<Arc<Dictionary>> {
        match &self.learning {
            Learning::Learnt(dictionary) => Some(dictionary.clone()),
            _ => None,
        }
    }

    /// Adds `json`, one in [`SAMPLE_EVERY`] objects, to what the dictionary is learnt from,
    /// until there is enough of it.
    fn sample(&mut self, json: &[u8]) {
        let Learning::Sampling { content, packed } = &mut self.learning else {
            return;
        };
        *packed += 1;
        if (*packed - 1) % SAMPLE_EVERY != 0 {
            return;
        }
        let room = DICTIONARY_BYTES - content.len();
        content.extend_from_slice(&json[..json.len().min(room)]);
        if content.len() < DICTIONARY_BYTES {
            return;
        }
        self.learning = match Dictionary::of(std::mem::take(content)) {
            Some(dictionary) => Learning::Learnt(Arc::new(dictionary)),
            None => {
                tracing::error!("cannot allocate a store's compression dictionary");
                Learning::Failed
            }
        };
    }
}

/// `K` packed: [`Packed::unpack`] gives it back. `H` is what is kept of its metadata beside the
/// JSON ([`Head`]).
pub(crate) struct Packed<K, H = ObjectMeta> {
    /// What the broker reads without decoding, and the store's key is made of.
    metadata: H,
    /// The uid and resourceVersion, outside `metadata`: the store's key copies both from
    /// `metadata` (kube's `ObjectRef::extra`, which no lookup reads), so each object held
    /// them as four heap strings.
    identity: Identity,
    /// The object as compact JSON.
    body: Body,
    kind: PhantomData<fn() -> K>,
}

/// An object's compact JSON as its store keeps it.
#[derive(Clone)]
enum Body {
    /// As it was encoded: one of its store's newest changes ([`Packer::pack_changed`]).
    Plain(Arc<[u8]>),
    /// Compressed from `len` bytes, against `dictionary` if its store had learnt one.
    Compressed {
        bytes: Arc<[u8]>,
        len: u32,
        dictionary: Option<Arc<Dictionary>>,
    },
}

impl Body {
    /// `json` compressed against `dictionary`.
    fn compressed(json: &[u8], dictionary: Option<Arc<Dictionary>>) -> Result<Self, PackError> {
        Ok(Self::Compressed {
            bytes: compress(json, dictionary.as_deref())?.into(),
            len: u32::try_from(json.len()).unwrap_or(u32::MAX),
            dictionary,
        })
    }

    /// The bytes kept.
    fn kept_len(&self) -> usize {
        match self {
            Self::Plain(json) => json.len(),
            Self::Compressed { bytes, .. } => bytes.len(),
        }
    }

    /// The bytes of JSON.
    fn json_len(&self) -> usize {
        match self {
            Self::Plain(json) => json.len(),
            Self::Compressed { len, .. } => *len as usize,
        }
    }
}

/// An object's uid and resourceVersion as a store keeps them.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Identity {
    /// A UUID and a decimal resourceVersion, as an API server gives them: 24 bytes, no heap.
    Compact { uid: [u8; 16], version: u64 },
    /// Anything else, as it came.
    Other(Box<(Option<String>, Option<String>)>),
}

impl Identity {
    fn of(meta: &ObjectMeta) -> Self {
        let (uid, version) = (meta.uid.as_deref(), meta.resource_version.as_deref());
        match (uid.and_then(uuid_bytes), version.and_then(decimal)) {
            (Some(uid), Some(version)) => Self::Compact { uid, version },
            _ => Self::Other(Box::new((meta.uid.clone(), meta.resource_version.clone()))),
        }
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        match self {
            Self::Compact { uid, .. } => Some(Cow::Owned(uuid_text(uid))),
            Self::Other(other) => other.0.as_deref().map(Cow::Borrowed),
        }
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        match self {
            Self::Compact { version, .. } => Some(Cow::Owned(version.to_string())),
            Self::Other(other) => other.1.as_deref().map(Cow::Borrowed),
        }
    }
}

/// What a packed object keeps of its metadata beside its JSON: at least what its store's key
/// is made of (name and namespace).
pub(crate) trait Head: Clone {
    fn of(meta: &ObjectMeta) -> Self;
    fn name(&self) -> Option<&str>;
    fn namespace(&self) -> Option<&str>;
}

/// The metadata a store of a controller's own kind keeps: kube-runtime's `Controller` reads
/// its objects as `Resource`s. Name, namespace, generation and deletionTimestamp. Not labels:
/// a `BTreeMap` of labels takes a node of about 540 bytes however few they are, a seventh of a
/// store's memory at 10,000 claims; [`Packed::decoded_labels`] reads them. Not uid and
/// resourceVersion either (`identity`).
impl Head for ObjectMeta {
    fn of(meta: &ObjectMeta) -> Self {
        ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            generation: meta.generation,
            deletion_timestamp: meta.deletion_timestamp.clone(),
            ..ObjectMeta::default()
        }
    }

    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }
}

/// An object's name and namespace alone: what a store no controller is driven by keys its
/// objects with. An `ObjectMeta` is about 340 bytes of `Option`s however little is set, most
/// of a packed object: in a heap profile over 20,000 claims, a managed resource (one per
/// handle) took 440 bytes with one and 112 with its names alone.
#[derive(Clone, Debug)]
pub(crate) struct Names {
    name: Option<Box<str>>,
    namespace: Option<Box<str>>,
}

impl Head for Names {
    fn of(meta: &ObjectMeta) -> Self {
        Self {
            name: meta.name.as_deref().map(Box::from),
            namespace: meta.namespace.as_deref().map(Box::from),
        }
    }

    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }
}

/// The hex digits of a UUID's groups, in order.
const UUID_GROUPS: [usize; 5] = [8, 4, 4, 4, 12];

/// The 16 bytes of `text`, when it is a UUID written as [`uuid_text`] writes it back
/// (lowercase, hyphenated).
fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    // Every watch event packs one: read in place, no allocation.
    let mut groups = text.split('-');
    let mut number: u128 = 0;
    for len in UUID_GROUPS {
        let group = groups.next().filter(|group| group.len() == len)?;
        for digit in group.bytes() {
            let value = match digit {
                b'0'..=b'9' => digit - b'0',
                b'a'..=b'f' => digit - b'a' + 10,
                _ => return None,
            };
            number = number << 4 | u128::from(value);
        }
    }
    groups.next().is_none().then(|| number.to_be_bytes())
}

fn uuid_text(bytes: &[u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(36);
    let mut nibbles = bytes.iter().flat_map(|byte| [byte >> 4, byte & 0xf]);
    for (i, len) in UUID_GROUPS.into_iter().enumerate() {
        if i > 0 {
            text.push('-');
        }
        for nibble in nibbles.by_ref().take(len) {
            text.push(char::from(HEX[usize::from(nibble)]));
        }
    }
    text
}

/// `text` as a number, when it is one written as `u64::to_string` writes it back.
fn decimal(text: &str) -> Option<u64> {
    let canonical =
        text.bytes().all(|b| b.is_ascii_digit()) && (text.len() == 1 || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

thread_local! {
    /// A compression context per thread: a new one for each object cost more than the work.
    static COMPRESSOR: RefCell<Option<CCtx<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// `json` compressed, against `dictionary` if there is one.
fn compress(json: &[u8], dictionary: Option<&Dictionary>) -> Result<Vec<u8>, PackError> {
    COMPRESSOR.with_borrow_mut(|context| {
        let context = match context {
            Some(context) => context,
            None => context
                .insert(CCtx::try_create().ok_or(PackError::Compress("no memory for a context"))?),
        };
        let mut compressed = Vec::with_capacity(zstd_safe::compress_bound(json.len()));
        match dictionary {
            Some(dictionary) => {
                context.compress_using_cdict(&mut compressed, json, &dictionary.compress)
            }
            None => context.compress(&mut compressed, json, LEVEL),
        }
        .map_err(|code| PackError::Compress(zstd_safe::get_error_name(code)))?;
        Ok(compressed)
    })
}

/// `compressed` decompressed into its `len` bytes, against `dictionary` if there is one.
fn decompress(
    compressed: &[u8],
    len: usize,
    dictionary: Option<&Dictionary>,
) -> Result<Vec<u8>, UnpackError> {
    DECOMPRESSOR.with_borrow_mut(|context| {
        let context = match context {
            Some(context) => context,
            None => context.insert(
                DCtx::try_create().ok_or(UnpackError::Decompress("no memory for a context"))?,
            ),
        };
        let mut json = Vec::with_capacity(len);
        match dictionary {
            Some(dictionary) => {
                context.decompress_using_dict(&mut json, compressed, &dictionary.content)
            }
            None => context.decompress(&mut json, compressed),
        }
        .map_err(|code| UnpackError::Decompress(zstd_safe::get_error_name(code)))?;
        Ok(json)
    })
}

impl<K: Resource + Serialize> Packed<K> {
    /// `object` packed alone, without a store's dictionary.
    pub(crate) fn pack(object: &K) -> Self {
        match Self::encode(object) {
            Some(json) => Self::of_json(object, &json, None),
            None => Self::empty(object),
        }
    }
}

impl<K: Resource + Serialize, H: Head> Packed<K, H> {
    /// `object` as compact JSON; `None`, logged, when it does not encode: a typed object's
    /// maps have string keys, so only a lack of memory gets there.
    fn encode(object: &K) -> Option<Vec<u8>> {
        serde_json::to_vec(object)
            .inspect_err(|error| {
                let name = object.meta().name.as_deref();
                tracing::error!(%error, ?name, "cannot pack an object for its store");
            })
            .ok()
    }

    /// `object`, whose JSON is `json`, packed against `dictionary`.
    fn of_json(object: &K, json: &[u8], dictionary: Option<Arc<Dictionary>>) -> Self {
        match Body::compressed(json, dictionary) {
            Ok(body) => Self::with_body(object, body),
            Err(error) => {
                let name = object.meta().name.as_deref();
                tracing::error!(%error, ?name, "cannot pack an object for its store");
                Self::empty(object)
            }
        }
    }

    /// `object`, whose JSON is `json`, kept plain.
    fn plain(object: &K, json: Vec<u8>) -> Self {
        Self::with_body(object, Body::Plain(json.into()))
    }

    fn with_body(object: &K, body: Body) -> Self {
        Self {
            metadata: H::of(object.meta()),
            identity: Identity::of(object.meta()),
            body,
            kind: PhantomData,
        }
    }

    /// `object` packed empty, its store's key alone: all a deleted object's event needs (it only
    /// drops what the store kept under that key), and what an object that cannot be packed is
    /// kept as; it says so when it is unpacked.
    pub(crate) fn empty(object: &K) -> Self {
        Self::with_body(object, Body::Plain(Arc::from(Vec::new())))
    }
}

impl<K, H: Clone> Packed<K, H> {
    /// This object compressed against `dictionary`, if it is kept plain; `None` (logged when
    /// it does not compress, which only a lack of memory makes) otherwise.
    fn compressed(&self, dictionary: Option<Arc<Dictionary>>) -> Option<Self> {
        let Body::Plain(json) = &self.body else {
            return None;
        };
        let body = Body::compressed(json, dictionary)
            .inspect_err(|error| tracing::error!(%error, "cannot compress a stored object"))
            .ok()?;
        Some(Self {
            metadata: self.metadata.clone(),
            identity: self.identity.clone(),
            body,
            kind: PhantomData,
        })
    }
}

impl<K: DeserializeOwned, H> Packed<K, H> {
    /// The object as it was packed.
    pub(crate) fn unpack(&self) -> Result<K, UnpackError> {
        self.unpack_as()
    }
}

impl<K: Resource + DeserializeOwned> Packed<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    /// The object `store` keeps under `key`, unpacked. `None` when the store has none, or has
    /// one that does not unpack: the broker packed it itself, so only a bug gets there, and
    /// that is logged; callers treat it as not in the store, as one they have not seen yet.
    pub(crate) fn read(store: &Store<Self>, key: &ObjectRef<Self>) -> Option<K> {
        let packed = store.get(key)?;
        packed
            .unpack()
            .inspect_err(
                |error| tracing::error!(%error, object = %key, "cannot unpack a stored object"),
            )
            .ok()
    }
}

impl<K, H> Packed<K, H> {
    /// The object's uid (`metadata` does not keep it).
    pub(crate) fn uid(&self) -> Option<Cow<'_, str>> {
        self.identity.uid()
    }

    /// The object's resourceVersion (`metadata` does not keep it).
    pub(crate) fn resource_version(&self) -> Option<Cow<'_, str>> {
        self.identity.resource_version()
    }

    /// Whether the object waits uncompressed ([`Packer::pack_changed`]).
    #[cfg(test)]
    pub(crate) fn is_plain(&self) -> bool {
        matches!(self.body, Body::Plain(_))
    }

    /// The object's labels, decoded alone.
    pub(crate) fn decoded_labels(&self) -> Result<BTreeMap<String, String>, UnpackError> {
        #[derive(Deserialize)]
        struct Labelled {
            #[serde(default)]
            metadata: Labels,
        }
        #[derive(Default, Deserialize)]
        struct Labels {
            #[serde(default)]
            labels: Option<BTreeMap<String, String>>,
        }
        let labelled: Labelled = self.unpack_as()?;
        Ok(labelled.metadata.labels.unwrap_or_default())
    }

    /// The object as it was packed, decoded as `T` (a JSON value, say).
    pub(crate) fn unpack_as<T: DeserializeOwned>(&self) -> Result<T, UnpackError> {
        match &self.body {
            Body::Plain(json) => Ok(serde_json::from_slice(json)?),
            Body::Compressed {
                bytes,
                len,
                dictionary,
            } => {
                let json = decompress(bytes, *len as usize, dictionary.as_deref())?;
                Ok(serde_json::from_slice(&json)?)
            }
        }
    }
}

impl<K, H: Clone> Clone for Packed<K, H> {
    fn clone(&self) -> Self {
        Self {
            metadata: self.metadata.clone(),
            identity: self.identity.clone(),
            body: self.body.clone(),
            kind: PhantomData,
        }
    }
}

impl<K, H: Head> fmt::Debug for Packed<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packed")
            .field("namespace", &self.metadata.namespace())
            .field("name", &self.metadata.name())
            .field("resource_version", &self.resource_version())
            .field("json_bytes", &self.body.json_len())
            .field("kept_bytes", &self.body.kept_len())
            .field(
                "compressed",
                &match &self.body {
                    Body::Plain(_) => "no",
                    Body::Compressed {
                        dictionary: None, ..
                    } => "alone",
                    Body::Compressed {
                        dictionary: Some(_),
                        ..
                    } => "against its store's dictionary",
                },
            )
            .finish()
    }
}

/// Keyed as a store keys it, from its `metadata`: its uid and resourceVersion are not there
/// (the store's key would copy them as two more strings: `Identified` reads them).
impl<K: Resource> Resource for Packed<K> {
    type DynamicType = SharedType<K::DynamicType>;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Keyed as [`Packed`]'s `Resource` keys it, from its [`Names`]: no uid or resourceVersion in the
/// store's key (`Identified` reads them).
impl<K: Resource> kube::runtime::reflector::Lookup for Packed<K, Names> {
    type DynamicType = SharedType<K::DynamicType>;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        self.metadata.name().map(Cow::Borrowed)
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        self.metadata.namespace().map(Cow::Borrowed)
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

/// Decoded as `K`, then packed (kube-runtime's controller asks for it; the broker packs what
/// its watches decode).
impl<'de, K: Resource + Serialize + DeserializeOwned> Deserialize<'de> for Packed<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(deserializer).map(|object| Self::pack(&object))
    }
}

/// An object's uid and resourceVersion, wherever it keeps them: a packed object keeps them
/// outside its metadata.
pub(crate) trait Identified {
    fn uid(&self) -> Option<Cow<'_, str>>;
    fn resource_version(&self) -> Option<Cow<'_, str>>;
}

impl<P: Clone, U: Clone> Identified for kube::core::Object<P, U> {
    fn uid(&self) -> Option<Cow<'_, str>> {
        self.metadata.uid.as_deref().map(Cow::Borrowed)
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        self.metadata.resource_version.as_deref().map(Cow::Borrowed)
    }
}

impl Identified for kube::api::DynamicObject {
    fn uid(&self) -> Option<Cow<'_, str>> {
        self.metadata.uid.as_deref().map(Cow::Borrowed)
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        self.metadata.resource_version.as_deref().map(Cow::Borrowed)
    }
}

/// An object as JSON (a managed resource's live state).
impl Identified for serde_json::Value {
    fn uid(&self) -> Option<Cow<'_, str>> {
        self.pointer("/metadata/uid")?.as_str().map(Cow::Borrowed)
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        self.pointer("/metadata/resourceVersion")?
            .as_str()
            .map(Cow::Borrowed)
    }
}

/// The stores' tests watch ConfigMaps, a typed kind the broker itself does not store.
#[cfg(test)]
impl Identified for k8s_openapi::api::core::v1::ConfigMap {
    fn uid(&self) -> Option<Cow<'_, str>> {
        self.metadata.uid.as_deref().map(Cow::Borrowed)
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        self.metadata.resource_version.as_deref().map(Cow::Borrowed)
    }
}

impl<K, H> Identified for Packed<K, H> {
    fn uid(&self) -> Option<Cow<'_, str>> {
        Packed::uid(self)
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        Packed::resource_version(self)
    }
}

#[cfg(test)]
mod tests {
    use kube::ResourceExt;

    use super::*;
    use crate::api::domain::OperatorDomain;
    use crate::api::kinds::{ClaimObject, Kinds};

    /// The packer of a claim store.
    fn claim_packer() -> Packer<ClaimObject> {
        Packer::new(Kinds::new(&OperatorDomain::default()).stored_claim)
    }

    /// The packer of a managed resource's store of `resource`.
    fn resource_packer(resource: &kube::core::ApiResource) -> Packer<DynamicObject, Names> {
        Packer::new(SharedType::new(resource.clone()))
    }

    impl<K, H> Packed<K, H> {
        /// The bytes kept compressed, and whether against a dictionary; `None` when plain.
        fn compressed_bytes(&self) -> Option<(usize, bool)> {
            match &self.body {
                Body::Plain(_) => None,
                Body::Compressed {
                    bytes, dictionary, ..
                } => Some((bytes.len(), dictionary.is_some())),
            }
        }
    }

    #[test]
    fn a_packed_claim_unpacks_to_the_same_claim_and_keeps_what_filters_it() {
        let claim: ClaimObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "user", "uid": "u1", "resourceVersion": "7",
                         "labels": {"app": "lab"}, "annotations": {"note": "long text"}},
            "spec": {"resources": [{"template": {"kind": "ConfigMap", "data": {"b": "1", "a": "2"}}}]},
            "status": {"resources": [{"name": "r", "state": {"kind": "ConfigMap"}}]},
        }))
        .expect("a claim");
        let packed = Packed::pack(&claim);
        let unpacked = packed.unpack().expect("unpacks");
        assert_eq!(
            serde_json::to_string(&unpacked).expect("serialises"),
            serde_json::to_string(&claim).expect("serialises"),
            "the same claim, keys in the same order"
        );
        assert_eq!(packed.name_any(), "c");
        assert_eq!(ResourceExt::namespace(&packed).as_deref(), Some("user"));
        assert_eq!(packed.uid().as_deref(), Some("u1"));
        assert_eq!(packed.resource_version().as_deref(), Some("7"));
        assert!(packed.labels().is_empty(), "labels are not kept aside");
        assert_eq!(
            packed
                .decoded_labels()
                .expect("decodes")
                .get("app")
                .map(String::as_str),
            Some("lab")
        );
        assert!(packed.annotations().is_empty(), "only what filters it");
    }

    #[test]
    fn a_packed_claim_keeps_its_json_compressed() {
        let state: serde_json::Map<String, serde_json::Value> = (0..40)
            .map(|i| {
                (
                    format!("key-{i}"),
                    serde_json::json!(format!("value {i} of the state")),
                )
            })
            .collect();
        let claim: ClaimObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "user"},
            "spec": {"resources": [{"template": {"kind": "ConfigMap", "data": state}}]},
            "status": {"resources": [{"name": "r", "state": {"kind": "ConfigMap", "data": state}}]},
        }))
        .expect("a claim");
        let json = serde_json::to_vec(&claim).expect("serialises");
        let packed = Packed::pack(&claim);
        assert_eq!(packed.body.json_len(), json.len());
        let (compressed, _) = packed.compressed_bytes().expect("compressed");
        assert!(
            compressed * 3 < json.len(),
            "{compressed} bytes kept for {} of JSON",
            json.len()
        );
        let unpacked = packed.unpack().expect("unpacks");
        assert_eq!(serde_json::to_vec(&unpacked).expect("serialises"), json);
    }

    /// A bound claim as the broker leaves it, `i` making its names, uid and data its own.
    fn bound_claim(i: usize) -> ClaimObject {
        let state = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("guid{i}-cfg"), "namespace": "poolboy-managed",
                "uid": format!("5b0c1a52-{i:04}-4d4e-9c1f-0a1b2c3d4e5f"),
                "labels": {"example.com/kind": "config"}},
            "data": {"color": format!("c{}", i % 7), "owner": "unknown"}});
        serde_json::from_value(serde_json::json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
            "metadata": {"name": format!("cfg-{i}"), "namespace": format!("user{}", i % 13),
                "uid": format!("9e1f0c2a-{i:04}-4b7e-8f3d-2c1b0a9f8e7d"),
                "resourceVersion": format!("{}", 1000 + i), "generation": 1,
                "finalizers": ["poolboy.gpte.redhat.com"]},
            "spec": {"resources": [{"name": "config", "template": {"apiVersion": "v1",
                "kind": "ConfigMap", "metadata": {"labels": {"example.com/kind": "config"}},
                "data": {"color": format!("c{}", i % 7)}}}]},
            "status": {"resourceHandle": {"apiVersion": "poolboy.gpte.redhat.com/v1",
                    "kind": "ResourceHandle", "name": format!("guid-{i:05}"),
                    "namespace": "poolboy"},
                "resources": [{"name": "config", "provider": {"name": "configmap",
                    "namespace": "poolboy"}, "state": state}]},
        }))
        .expect("a claim")
    }

    /// A claim store fed by `packer`: each change applied, then what the packer replaces.
    struct ClaimStore {
        packer: Packer<ClaimObject>,
        writer: reflector::store::Writer<StoredClaim>,
    }

    impl ClaimStore {
        fn new() -> Self {
            let kinds = Kinds::new(&OperatorDomain::default());
            Self {
                packer: Packer::new(kinds.stored_claim.clone()),
                writer: reflector::store::Writer::new(kinds.stored_claim),
            }
        }

        /// Applies a change to `claim`; the objects the packer compressed after it.
        fn change(&mut self, claim: &ClaimObject) -> Vec<StoredClaim> {
            let packed = self.packer.pack_changed(claim);
            self.writer
                .apply_watcher_event(&kube::runtime::watcher::Event::Apply(packed));
            let compressed = self.packer.compress_older(&self.writer.as_reader());
            for packed in &compressed {
                self.writer
                    .apply_watcher_event(&kube::runtime::watcher::Event::Apply(packed.clone()));
            }
            compressed
        }

        fn delete(&mut self, claim: &ClaimObject) {
            self.writer
                .apply_watcher_event(&kube::runtime::watcher::Event::Delete(Packed::empty(claim)));
        }

        fn stored(&self, claim: &ClaimObject) -> Arc<StoredClaim> {
            let key = ObjectRef::new_with(&claim.name_any(), self.packer.kind.clone())
                .within(&claim.namespace().unwrap_or_default());
            self.writer.as_reader().get(&key).expect("in the store")
        }
    }

    /// `claim` at another resourceVersion.
    fn changed(claim: &ClaimObject, version: usize) -> ClaimObject {
        let mut changed = claim.clone();
        changed.metadata.resource_version = Some(version.to_string());
        changed
    }

    #[test]
    fn a_change_waits_plain_until_newer_ones_fill_the_plain_bytes_then_is_compressed() {
        let mut store = ClaimStore::new();
        let first = bound_claim(0);
        assert!(store.change(&first).is_empty());
        assert_eq!(store.stored(&first).compressed_bytes(), None, "kept plain");
        let mut compressed = Vec::new();
        let mut plain_bytes = store.stored(&first).body.json_len();
        let mut i = 1;
        while compressed.is_empty() {
            let claim = bound_claim(i);
            plain_bytes += serde_json::to_vec(&claim).expect("serialises").len();
            compressed = store.change(&claim);
            i += 1;
        }
        assert!(
            plain_bytes > PLAIN_BYTES,
            "{plain_bytes} bytes plain before one was compressed"
        );
        assert_eq!(compressed.len(), 1, "the oldest alone");
        assert_eq!(compressed[0].name_any(), first.name_any());
        let stored = store.stored(&first);
        assert!(
            stored.compressed_bytes().is_some(),
            "the store keeps it compressed"
        );
        assert_eq!(
            serde_json::to_string(&stored.unpack().expect("unpacks")).expect("serialises"),
            serde_json::to_string(&first).expect("serialises"),
        );
        let newest = bound_claim(i - 1);
        assert_eq!(store.stored(&newest).compressed_bytes(), None);
    }

    #[test]
    fn a_change_replaced_or_deleted_before_its_turn_is_left_to_what_replaced_it() {
        let mut store = ClaimStore::new();
        let replaced = bound_claim(0);
        let deleted = bound_claim(1);
        store.change(&replaced);
        store.change(&deleted);
        store.delete(&deleted);
        let mut others = (2..).map(bound_claim);
        for claim in others.by_ref().take(10) {
            store.change(&claim);
        }
        let newer = changed(&replaced, 5000);
        store.change(&newer);
        let mut compressed = Vec::new();
        while !compressed
            .iter()
            .any(|p: &StoredClaim| p.name_any() == "cfg-2")
        {
            compressed.extend(store.change(&others.next().expect("endless")));
        }
        let names: Vec<String> = compressed.iter().map(|p| p.name_any()).collect();
        assert_eq!(
            names,
            ["cfg-2"],
            "neither the replaced version nor the deleted claim"
        );
        assert_eq!(
            store.stored(&replaced).compressed_bytes(),
            None,
            "the newer version waits its own turn"
        );
        while !compressed
            .iter()
            .any(|p| p.name_any() == replaced.name_any())
        {
            compressed.extend(store.change(&others.next().expect("endless")));
        }
        let stored = store.stored(&replaced);
        assert!(stored.compressed_bytes().is_some());
        assert_eq!(stored.resource_version().as_deref(), Some("5000"));
        assert_eq!(
            serde_json::to_string(&stored.unpack().expect("unpacks")).expect("serialises"),
            serde_json::to_string(&newer).expect("serialises"),
        );
    }

    #[test]
    fn a_listed_object_is_compressed_at_once_and_never_waits_plain() {
        let mut packer = claim_packer();
        let listed = packer.pack_listed(&bound_claim(0));
        assert!(listed.compressed_bytes().is_some());
        assert!(packer.plain.is_empty(), "nothing waits to be compressed");
    }

    #[test]
    fn a_store_learns_a_dictionary_that_packs_its_later_objects_smaller() {
        let claims: Vec<ClaimObject> = (0..200).map(bound_claim).collect();
        let mut packer = claim_packer();
        let packed: Vec<Packed<ClaimObject>> =
            claims.iter().map(|c| packer.pack_listed(c)).collect();
        for (claim, packed) in claims.iter().zip(&packed) {
            assert_eq!(
                serde_json::to_string(&packed.unpack().expect("unpacks")).expect("serialises"),
                serde_json::to_string(claim).expect("serialises"),
                "packed against a dictionary or not, the same claim"
            );
        }
        let dictionary = |packed: &Packed<ClaimObject>| packed.compressed_bytes().map(|c| c.1);
        assert_eq!(
            dictionary(&packed[0]),
            Some(false),
            "the first have none to use"
        );
        assert_eq!(
            dictionary(&packed[199]),
            Some(true),
            "learnt from the first ones"
        );
        let size = |packed: &[Packed<ClaimObject>]| -> usize {
            packed
                .iter()
                .filter_map(|p| p.compressed_bytes())
                .map(|c| c.0)
                .sum()
        };
        let alone: Vec<_> = claims[100..].iter().map(Packed::pack).collect();
        assert!(
            size(&packed[100..]) * 3 < size(&alone) * 2,
            "{} bytes against the dictionary, {} alone",
            size(&packed[100..]),
            size(&alone)
        );
    }

    #[test]
    fn objects_unlike_the_dictionary_still_unpack() {
        let mut packer = claim_packer();
        for i in 0..200 {
            packer.pack_listed(&bound_claim(i));
        }
        let unlike: ClaimObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
            "metadata": {"name": "other", "namespace": "elsewhere"},
            "spec": {"provider": {"name": "lab", "parameterValues": {"region": "eu", "size": 3}}},
        }))
        .expect("a claim");
        let packed = packer.pack_listed(&unlike);
        assert_eq!(packed.compressed_bytes().map(|c| c.1), Some(true));
        assert_eq!(
            serde_json::to_string(&packed.unpack().expect("unpacks")).expect("serialises"),
            serde_json::to_string(&unlike).expect("serialises")
        );
    }

    #[test]
    fn uid_and_version_are_kept_outside_the_metadata_and_read_back_as_they_came() {
        let claim = |uid: &str, version: &str| -> ClaimObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
                "metadata": {"name": "c", "namespace": "user", "uid": uid,
                             "resourceVersion": version},
                "spec": {},
            }))
            .expect("a claim")
        };
        for (uid, version) in [
            ("0b9e4a6c-5f1d-4c2e-9a7b-3d8f6e1c2b0a", "123456789"),
            ("00000000-0000-0000-0000-000000000000", "0"),
            // Not as the compact form writes them back: kept as they came.
            ("0B9E4A6C-5F1D-4C2E-9A7B-3D8F6E1C2B0A", "0123"),
            ("u1", "18446744073709551616"),
            ("0b9e4a6c5f1d4c2e9a7b3d8f6e1c2b0a", "v7"),
        ] {
            let packed = Packed::pack(&claim(uid, version));
            assert_eq!(packed.uid().as_deref(), Some(uid));
            assert_eq!(packed.resource_version().as_deref(), Some(version));
            assert_eq!(packed.meta().uid, None, "not in the store's key");
            assert_eq!(packed.meta().resource_version, None);
        }
        let compact = Packed::pack(&claim("0b9e4a6c-5f1d-4c2e-9a7b-3d8f6e1c2b0a", "42"));
        assert!(matches!(compact.identity, Identity::Compact { .. }));
    }

    proptest::proptest! {
        #[test]
        fn a_uuid_and_a_version_read_back_as_they_came(
            bytes: [u8; 16],
            text in "[0-9a-fA-F-]{0,40}",
            version: u64,
            digits in "[+0-9]{0,21}",
        ) {
            proptest::prop_assert_eq!(uuid_bytes(&uuid_text(&bytes)), Some(bytes));
            if let Some(parsed) = uuid_bytes(&text) {
                proptest::prop_assert_eq!(uuid_text(&parsed), text);
            }
            proptest::prop_assert_eq!(decimal(&version.to_string()), Some(version));
            if let Some(parsed) = decimal(&digits) {
                proptest::prop_assert_eq!(parsed.to_string(), digits);
            }
        }
    }

    /// A ConfigMap a handle made, as its managed watch brings it, and the kind it is of.
    fn managed_configmap() -> (kube::core::ApiResource, DynamicObject) {
        let resource = kube::core::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let mut object = DynamicObject::new("guid-cfg", &resource).within("managed");
        object.metadata.uid = Some("5b0c1a52-0001-4d4e-9c1f-0a1b2c3d4e5f".to_owned());
        object.metadata.resource_version = Some("812".to_owned());
        object.metadata.labels = Some(BTreeMap::from([("app".to_owned(), "lab".to_owned())]));
        object.data = serde_json::json!({"data": {"color": "blue"}});
        (resource, object)
    }

    #[test]
    fn a_managed_resource_is_kept_with_its_names_alone_and_keyed_by_them() {
        let (resource, object) = managed_configmap();
        let packed: StoredResource = resource_packer(&resource).pack_listed(&object);

        let kind = SharedType::new(resource.clone());
        let key = kube::runtime::reflector::Lookup::to_object_ref(&packed, kind.clone());
        assert_eq!(key, ObjectRef::new_with("guid-cfg", kind).within("managed"));
        assert_eq!(key.extra.uid, None, "the store's key copies no uid");
        assert_eq!(key.extra.resource_version, None);
        assert_eq!(
            Identified::uid(&packed).as_deref(),
            Some("5b0c1a52-0001-4d4e-9c1f-0a1b2c3d4e5f")
        );
        assert_eq!(
            Identified::resource_version(&packed).as_deref(),
            Some("812")
        );
        assert_eq!(
            serde_json::to_value(packed.unpack().expect("unpacks")).expect("serialises"),
            serde_json::to_value(&object).expect("serialises"),
        );
        assert!(
            size_of::<StoredResource>() * 3 < size_of::<StoredClaim>(),
            "{} bytes a managed resource, {} a claim",
            size_of::<StoredResource>(),
            size_of::<StoredClaim>()
        );
    }

    #[test]
    fn a_deleted_objects_key_is_the_key_of_what_its_store_kept_with_nothing_packed() {
        let (resource, object) = managed_configmap();
        let kept: StoredResource = resource_packer(&resource).pack_listed(&object);
        let key = StoredResource::empty(&object);

        let kind = SharedType::new(resource.clone());
        let lookup = kube::runtime::reflector::Lookup::to_object_ref;
        assert_eq!(lookup(&key, kind.clone()), lookup(&kept, kind));
        assert_eq!(Identified::uid(&key), Identified::uid(&kept));
        assert_eq!(key.body.kept_len(), 0, "no JSON kept");
        assert!(key.unpack().is_err(), "nothing to unpack");
    }

    #[test]
    fn a_claim_packed_empty_does_not_unpack() {
        let packed = Packed::<ClaimObject> {
            metadata: ObjectMeta::default(),
            identity: Identity::of(&ObjectMeta::default()),
            body: Body::Compressed {
                bytes: Arc::from(Vec::new()),
                len: 0,
                dictionary: None,
            },
            kind: PhantomData,
        };
        assert!(matches!(
            packed.unpack(),
            Err(UnpackError::Decompress(_) | UnpackError::Decode(_))
        ));
    }
}

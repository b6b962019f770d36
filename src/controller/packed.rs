//! Objects as a long-lived store keeps them packed: the metadata that names and filters them,
//! and the whole object as compact JSON, compressed, decoded by whoever reads it.
//!
//! Parsed, a bound claim took 8.0 KB of memory for 2.3 KB of JSON: its status copies its
//! resource's state as a `serde_json::Value` (about 2 KB), and each of its references and
//! conditions is four to six heap strings. Every claim of the cluster sits in the claim store
//! for the broker's whole life, and is read by one reconcile at a time (issue 11: at 100,000
//! claims the stores were most of the broker's memory). Decoding a claim takes microseconds,
//! against milliseconds for the reconcile that reads it.
//!
//! The JSON is compressed (zstd, each object on its own: the broker's objects share no
//! dictionary it could rely on): a bound claim's 2,261 bytes of JSON take 739, its handle's
//! 1,435 take 537, its ConfigMap's 861 take 354.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use kube::Resource;
use kube::api::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

/// zstd's fastest level: a store packs every object each watch event brings.
const LEVEL: i32 = 1;

/// Why a packed object does not unpack.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("cannot decompress a packed object: {0}")]
    Decompress(#[source] std::io::Error),
    #[error("cannot decode a packed object: {0}")]
    Decode(#[from] serde_json::Error),
}

/// `K` packed: [`Packed::unpack`] gives it back.
pub(crate) struct Packed<K> {
    /// What the broker reads without decoding: name, namespace, uid, resourceVersion,
    /// generation and deletionTimestamp. Not labels: a `BTreeMap` of labels takes a node of
    /// about 540 bytes however few they are, a seventh of a store's memory at 10,000 claims
    /// (issue 11); [`Packed::decoded_labels`] reads them.
    metadata: ObjectMeta,
    /// The object as compact JSON, compressed.
    compressed: Arc<[u8]>,
    /// The length of that JSON.
    json_len: u32,
    kind: PhantomData<fn() -> K>,
}

thread_local! {
    /// A compression context per thread: a new one for each object cost more than the work.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

fn compress(json: &[u8]) -> std::io::Result<Vec<u8>> {
    COMPRESSOR.with_borrow_mut(|compressor| {
        let compressor = match compressor {
            Some(compressor) => compressor,
            None => compressor.insert(zstd::bulk::Compressor::new(LEVEL)?),
        };
        compressor.compress(json)
    })
}

fn decompress(compressed: &[u8], len: usize) -> std::io::Result<Vec<u8>> {
    DECOMPRESSOR.with_borrow_mut(|decompressor| {
        let decompressor = match decompressor {
            Some(decompressor) => decompressor,
            None => decompressor.insert(zstd::bulk::Decompressor::new()?),
        };
        decompressor.decompress(compressed, len)
    })
}

/// `object` as compact JSON, compressed, and the length of that JSON.
fn compressed_json(object: &impl Serialize) -> std::io::Result<(Vec<u8>, usize)> {
    let json = serde_json::to_vec(object)?;
    Ok((compress(&json)?, json.len()))
}

impl<K: Resource + Serialize> Packed<K> {
    pub(crate) fn pack(object: &K) -> Self {
        let meta = object.meta();
        let metadata = ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            generation: meta.generation,
            deletion_timestamp: meta.deletion_timestamp.clone(),
            ..ObjectMeta::default()
        };
        // Neither step fails for a typed object (its maps have string keys) short of memory;
        // an object packed empty says so when it is unpacked.
        let (compressed, json_len) = match compressed_json(object) {
            Ok((compressed, len)) => (compressed, u32::try_from(len).unwrap_or(u32::MAX)),
            Err(error) => {
                tracing::error!(%error, name = ?meta.name, "cannot pack an object for its store");
                (Vec::new(), 0)
            }
        };
        Self {
            metadata,
            compressed: compressed.into(),
            json_len,
            kind: PhantomData,
        }
    }
}

impl<K: DeserializeOwned> Packed<K> {
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

impl<K> Packed<K> {
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
        let json = decompress(&self.compressed, self.json_len as usize)
            .map_err(UnpackError::Decompress)?;
        Ok(serde_json::from_slice(&json)?)
    }
}

impl<K> Clone for Packed<K> {
    fn clone(&self) -> Self {
        Self {
            metadata: self.metadata.clone(),
            compressed: self.compressed.clone(),
            json_len: self.json_len,
            kind: PhantomData,
        }
    }
}

impl<K> fmt::Debug for Packed<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packed")
            .field("namespace", &self.metadata.namespace)
            .field("name", &self.metadata.name)
            .field("resource_version", &self.metadata.resource_version)
            .field("json_bytes", &self.json_len)
            .field("compressed_bytes", &self.compressed.len())
            .finish()
    }
}

/// The dynamic type of a packed object: its kind's, shared. Every key of a store, and every
/// object a controller has scheduled, holds one (`ObjectRef::dyntype`), and the broker's kinds
/// are `ApiResource`s of five strings each: copied, they took a fifth of a store's memory
/// (issue 11). Equal by content (an `Arc` compares its pointers first).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct SharedType<D>(Arc<D>);

impl<D> SharedType<D> {
    pub(crate) fn new(dyntype: D) -> Self {
        Self(Arc::new(dyntype))
    }
}

impl<D> std::ops::Deref for SharedType<D> {
    type Target = D;

    fn deref(&self) -> &D {
        &self.0
    }
}

impl<K: Resource> Resource for Packed<K> {
    type DynamicType = SharedType<K::DynamicType>;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(&dt.0)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(&dt.0)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(&dt.0)
    }

    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(&dt.0)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(&dt.0)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Decoded as `K`, then packed (kube-runtime's controller asks for it; the broker packs what
/// its watches decode).
impl<'de, K: Resource + Serialize + DeserializeOwned> Deserialize<'de> for Packed<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(deserializer).map(|object| Self::pack(&object))
    }
}

#[cfg(test)]
mod tests {
    use kube::ResourceExt;

    use super::*;
    use crate::controller::kinds::ClaimObject;

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
        assert_eq!(packed.namespace().as_deref(), Some("user"));
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
        assert_eq!(packed.json_len as usize, json.len());
        assert!(
            packed.compressed.len() * 3 < json.len(),
            "{} bytes kept for {} of JSON",
            packed.compressed.len(),
            json.len()
        );
        let unpacked = packed.unpack().expect("unpacks");
        assert_eq!(serde_json::to_vec(&unpacked).expect("serialises"), json);
    }

    #[test]
    fn a_claim_packed_empty_does_not_unpack() {
        let packed = Packed::<ClaimObject> {
            metadata: ObjectMeta::default(),
            compressed: Arc::from(Vec::new()),
            json_len: 0,
            kind: PhantomData,
        };
        assert!(matches!(
            packed.unpack(),
            Err(UnpackError::Decompress(_) | UnpackError::Decode(_))
        ));
    }
}

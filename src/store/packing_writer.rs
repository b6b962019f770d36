//! A store's writer: it keeps the objects of the store's latest changes decoded, and packs the
//! others ([`Packed`]).
//!
//! The object of a change is read by the reconcile the change wakes, and often by the next
//! change's: a claim that comes and goes changes a handful of times in its first seconds.
//! Packed at each change (encode, compress) and unpacked at each read (decompress, decode),
//! such objects took a tenth of the broker's CPU under `make soak`'s churn. Kept decoded until
//! [`DECODED_CHANGES`] later changes have come to its store, an object that lives shorter than
//! that is never packed, and one that lives longer is packed once. A list's objects are packed
//! as they come (a start lists every object of the cluster), and a deleted object, which the
//! store only forgets, is not packed at all.

use std::collections::VecDeque;
use std::hash::Hash;

use kube::Resource;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;
use serde::Serialize;

use crate::store::packed::{Identity, Packed, Packer};

/// How many of a store's latest changes keep their objects decoded: enough for the reads that
/// follow a change, few enough that decoded objects (a bound claim takes 8 KB parsed, against
/// a few hundred bytes packed) do not scatter over the memory a churn leaves behind. With 512,
/// `make soak` kept 16 % more memory after everything was deleted than a fresh broker, against
/// 9–10 % with 64 or with none (docs/design.md, "store::packed").
const DECODED_CHANGES: usize = 64;

/// The writer of one store of packed objects.
pub(crate) struct PackingWriter<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    writer: Writer<Packed<K>>,
    store: Store<Packed<K>>,
    kind: <Packed<K> as Resource>::DynamicType,
    packer: Packer,
    /// The store's latest changes, oldest first: the object, and the version it changed to.
    decoded: VecDeque<(ObjectRef<Packed<K>>, Identity)>,
}

impl<K> PackingWriter<K>
where
    K: Resource + Clone + Serialize + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// The writer of a new store, whose objects are of kind `kind`.
    pub(crate) fn new(kind: <Packed<K> as Resource>::DynamicType) -> Self {
        let writer = Writer::new(kind.clone());
        Self {
            store: writer.as_reader(),
            writer,
            kind,
            packer: Packer::default(),
            decoded: VecDeque::new(),
        }
    }

    /// The store this writer fills.
    pub(crate) fn as_reader(&self) -> Store<Packed<K>> {
        self.store.clone()
    }

    /// Applies `event` to the store, and gives it back with what the store keeps of its object.
    pub(crate) fn apply(&mut self, event: &Event<K>) -> Event<Packed<K>> {
        let kept = match event {
            Event::Apply(object) => Event::Apply(Packed::decoded(object.clone())),
            Event::InitApply(object) => Event::InitApply(self.packer.pack(object)),
            Event::Delete(object) => Event::Delete(Packed::empty(object)),
            Event::Init => Event::Init,
            Event::InitDone => Event::InitDone,
        };
        self.writer.apply_watcher_event(&kept);
        if let (Event::Apply(object), Event::Apply(stored)) = (event, &kept) {
            let key = ObjectRef::from_obj_with(stored, self.kind.clone());
            self.decoded.push_back((key, Identity::of(object.meta())));
            while self.decoded.len() > DECODED_CHANGES {
                if let Some((key, identity)) = self.decoded.pop_front() {
                    self.pack(&key, &identity);
                }
            }
        }
        kept
    }

    /// Packs the object under `key`, if the store still keeps the version `identity` names
    /// decoded: one deleted since is gone, one changed since has a later change of its own,
    /// and a re-list packed what it brought.
    fn pack(&mut self, key: &ObjectRef<Packed<K>>, identity: &Identity) {
        let Some(stored) = self.store.get(key) else {
            return;
        };
        let Some(object) = stored.decoded_object().filter(|_| stored.is(identity)) else {
            return;
        };
        let packed = self.packer.pack(object);
        self.writer.apply_watcher_event(&Event::Apply(packed));
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;
    use crate::api::kinds::SharedType;

    fn config_map(name: &str, version: u64) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some(version.to_string()),
                ..ObjectMeta::default()
            },
            data: Some([("version".to_owned(), version.to_string())].into()),
            ..ConfigMap::default()
        }
    }

    fn writer() -> PackingWriter<ConfigMap> {
        PackingWriter::new(SharedType::new(()))
    }

    /// What the store keeps of `name`: whether decoded, and the version it unpacks to.
    fn kept(writer: &PackingWriter<ConfigMap>, name: &str) -> Option<(bool, String)> {
        let key = ObjectRef::new_with(name, SharedType::new(())).within("ns");
        let stored = writer.as_reader().get(&key)?;
        let object = stored.unpack().expect("unpacks");
        let version = object.data.and_then(|d| d.get("version").cloned());
        Some((
            stored.decoded_object().is_some(),
            version.unwrap_or_default(),
        ))
    }

    /// `count` changes of other objects, each a new one.
    fn others(writer: &mut PackingWriter<ConfigMap>, count: usize) {
        let known = writer.as_reader().state().len();
        for i in known..known + count {
            writer.apply(&Event::Apply(config_map(&format!("other-{i}"), 1)));
        }
    }

    #[test]
    fn a_changed_object_stays_decoded_until_later_changes_push_it_out_then_packs_the_same() {
        let mut writer = writer();
        writer.apply(&Event::Apply(config_map("a", 1)));
        assert_eq!(kept(&writer, "a"), Some((true, "1".to_owned())));
        others(&mut writer, DECODED_CHANGES - 1);
        assert_eq!(kept(&writer, "a"), Some((true, "1".to_owned())));
        others(&mut writer, 1);
        assert_eq!(kept(&writer, "a"), Some((false, "1".to_owned())), "packed");
        let decoded = writer
            .as_reader()
            .state()
            .iter()
            .filter(|o| o.decoded_object().is_some())
            .count();
        assert_eq!(
            decoded, DECODED_CHANGES,
            "never more than the latest changes"
        );
    }

    #[test]
    fn an_object_changed_again_is_packed_once_its_latest_change_is_pushed_out() {
        let mut writer = writer();
        writer.apply(&Event::Apply(config_map("a", 1)));
        writer.apply(&Event::Apply(config_map("a", 2)));
        // The first change goes out of the window: the store has moved on from it.
        others(&mut writer, DECODED_CHANGES - 1);
        assert_eq!(kept(&writer, "a"), Some((true, "2".to_owned())));
        others(&mut writer, 1);
        assert_eq!(kept(&writer, "a"), Some((false, "2".to_owned())));
    }

    #[test]
    fn a_list_is_packed_as_it_comes_and_a_deleted_object_is_forgotten() {
        let mut writer = writer();
        writer.apply(&Event::Init);
        writer.apply(&Event::InitApply(config_map("listed", 1)));
        writer.apply(&Event::InitDone);
        assert_eq!(kept(&writer, "listed"), Some((false, "1".to_owned())));

        writer.apply(&Event::Apply(config_map("gone", 1)));
        let deleted = writer.apply(&Event::Delete(config_map("gone", 2)));
        assert!(matches!(deleted, Event::Delete(_)));
        assert_eq!(kept(&writer, "gone"), None);
        // Its change leaving the window packs nothing back into the store.
        others(&mut writer, DECODED_CHANGES);
        assert_eq!(kept(&writer, "gone"), None);
    }

    #[test]
    fn a_relist_packs_what_it_brings_over_what_was_decoded() {
        let mut writer = writer();
        writer.apply(&Event::Apply(config_map("a", 1)));
        writer.apply(&Event::Init);
        writer.apply(&Event::InitApply(config_map("a", 1)));
        writer.apply(&Event::InitDone);
        assert_eq!(kept(&writer, "a"), Some((false, "1".to_owned())));
        others(&mut writer, DECODED_CHANGES);
        assert_eq!(kept(&writer, "a"), Some((false, "1".to_owned())));
    }
}

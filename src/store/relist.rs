//! A re-list's objects, let out to their controller once the store shows them.
//!
//! kube-runtime's store takes a list's objects together when the list is done (`InitDone`),
//! while the watch hands each one out as it comes (`InitApply`). At the first list that is
//! harmless: a controller's runner waits until its store has listed. At a re-list (the watch
//! lost its place) the store still shows the objects as they were before it: a reconcile of
//! an object the re-list brought would read the old version of it, or find nothing at all for
//! an object created while the watch was down, and take it for deleted. So, once the store
//! has listed, an object of a re-list whose version the store does not show yet is held here
//! until the list is done, then let out as the store has it.

use std::hash::Hash;

use futures::{Stream, TryStreamExt};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;

use crate::store::packed::Identified;

/// The gate between a watch's store and its controller; `T` is what goes out with each object.
pub(crate) struct RelistGate<K: Resource + 'static, T>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    kind: K::DynamicType,
    /// The store has taken a whole list once.
    listed: bool,
    /// Objects of the re-list under way the store does not show yet, in list order.
    held: Vec<(ObjectRef<K>, T)>,
}

impl<K, T> RelistGate<K, T>
where
    K: Resource + Identified + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// The gate of the store `store`, whose objects are of kind `kind`.
    pub(crate) fn new(store: Store<K>, kind: K::DynamicType) -> Self {
        Self {
            store,
            kind,
            listed: false,
            held: Vec::new(),
        }
    }

    /// `object`, just listed: out now, unless the store does not show this version of it yet.
    pub(crate) fn listed(&mut self, object: K, with: T) -> Option<(K, T)> {
        if !self.listed {
            return Some((object, with));
        }
        let key = ObjectRef::from_obj_with(&object, self.kind.clone());
        let shown = self.store.get(&key).is_some_and(|stored| {
            let version = stored.resource_version();
            version.is_some() && version == object.resource_version()
        });
        if shown {
            return Some((object, with));
        }
        self.held.push((key, with));
        None
    }

    /// The list is done and the store has taken it: the objects held, as the store has them
    /// (one deleted since is gone from it, and from here).
    pub(crate) fn list_done(&mut self) -> Vec<(K, T)> {
        self.listed = true;
        let held = std::mem::take(&mut self.held);
        held.into_iter()
            .filter_map(|(key, with)| Some((K::clone(&*self.store.get(&key)?), with)))
            .collect()
    }
}

/// Every object `events` touch, deleted ones too, as kube-runtime's `touched_objects` hands
/// them out, but those of a re-list once `gate`'s store shows them: `events` come from the
/// reflector that fills that store.
pub(crate) fn touched_once_stored<K, E>(
    events: impl Stream<Item = Result<Event<K>, E>>,
    mut gate: RelistGate<K, ()>,
) -> impl Stream<Item = Result<K, E>>
where
    K: Resource + Identified + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    events
        .map_ok(move |event| {
            let out: Vec<K> = match event {
                Event::Apply(object) | Event::Delete(object) => vec![object],
                Event::InitApply(object) => gate
                    .listed(object, ())
                    .into_iter()
                    .map(|(o, ())| o)
                    .collect(),
                Event::InitDone => gate.list_done().into_iter().map(|(o, ())| o).collect(),
                Event::Init => Vec::new(),
            };
            futures::stream::iter(out.into_iter().map(Ok))
        })
        .try_flatten()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    use super::*;
    use crate::api::kinds::SharedType;
    use crate::store::packed::Packed;

    fn config_map(name: &str, version: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                resource_version: Some(version.to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn names(out: &[(ConfigMap, u8)]) -> Vec<(&str, &str, u8)> {
        out.iter()
            .map(|(object, with)| {
                let meta = &object.metadata;
                let name = meta.name.as_deref().unwrap_or_default();
                (
                    name,
                    meta.resource_version.as_deref().unwrap_or_default(),
                    *with,
                )
            })
            .collect()
    }

    /// Applies `object` to the writer as a list's, then asks the gate.
    fn list(
        writer: &mut Writer<ConfigMap>,
        gate: &mut RelistGate<ConfigMap, u8>,
        object: ConfigMap,
        with: u8,
    ) -> Option<(ConfigMap, u8)> {
        writer.apply_watcher_event(&Event::InitApply(object.clone()));
        gate.listed(object, with)
    }

    fn done(
        writer: &mut Writer<ConfigMap>,
        gate: &mut RelistGate<ConfigMap, u8>,
    ) -> Vec<(ConfigMap, u8)> {
        writer.apply_watcher_event(&Event::InitDone);
        gate.list_done()
    }

    #[test]
    fn a_relisted_object_goes_out_once_the_store_shows_its_version() {
        let mut writer = Writer::<ConfigMap>::new(());
        let mut gate = RelistGate::new(writer.as_reader(), ());
        // The first list: everything goes out at once (the runner waits for the store).
        writer.apply_watcher_event(&Event::Init);
        assert!(list(&mut writer, &mut gate, config_map("same", "1"), 0).is_some());
        assert!(list(&mut writer, &mut gate, config_map("changed", "1"), 0).is_some());
        assert!(list(&mut writer, &mut gate, config_map("deleted", "1"), 0).is_some());
        assert!(done(&mut writer, &mut gate).is_empty());

        // A re-list: what the store already shows goes out; the rest waits for the end.
        writer.apply_watcher_event(&Event::Init);
        let same = list(&mut writer, &mut gate, config_map("same", "1"), 1);
        assert_eq!(
            names(&same.into_iter().collect::<Vec<_>>()),
            [("same", "1", 1)]
        );
        assert!(list(&mut writer, &mut gate, config_map("new", "5"), 2).is_none());
        assert!(list(&mut writer, &mut gate, config_map("changed", "6"), 3).is_none());
        assert!(
            gate.store
                .get(&ObjectRef::new("new").within("ns"))
                .is_none(),
            "the store shows the re-list only once it is done"
        );
        let out = done(&mut writer, &mut gate);
        assert_eq!(names(&out), [("new", "5", 2), ("changed", "6", 3)]);
    }

    /// A packed object keeps its version outside its metadata; the gate reads it there.
    #[test]
    fn a_relisted_packed_object_the_store_shows_goes_out_at_once() {
        let kind = SharedType::new(());
        let mut writer = Writer::<Packed<ConfigMap>>::new(kind.clone());
        let mut gate = RelistGate::new(writer.as_reader(), kind);
        let packed = |version| Packed::pack(&config_map("same", version));
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(packed("1")));
        writer.apply_watcher_event(&Event::InitDone);
        assert!(gate.list_done().is_empty());

        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(packed("1")));
        assert!(gate.listed(packed("1"), 0).is_some());
        writer.apply_watcher_event(&Event::InitApply(packed("2")));
        assert!(gate.listed(packed("2"), 1).is_none(), "not shown yet");
        writer.apply_watcher_event(&Event::InitDone);
        assert_eq!(gate.list_done().len(), 1);
    }

    #[test]
    fn an_object_held_and_gone_by_the_end_of_the_list_goes_nowhere() {
        let mut writer = Writer::<ConfigMap>::new(());
        let mut gate = RelistGate::new(writer.as_reader(), ());
        writer.apply_watcher_event(&Event::Init);
        assert!(done(&mut writer, &mut gate).is_empty());
        writer.apply_watcher_event(&Event::Init);
        // Held, but the store that the list leaves does not have it (a test's stand-in for an
        // object the list did not keep).
        assert!(gate.listed(config_map("never-stored", "3"), 0).is_none());
        assert!(done(&mut writer, &mut gate).is_empty());
    }
}

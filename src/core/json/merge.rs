//! Poolboy's deep merge (`deep_merge.py`), used for provider `default` (no overwrite, §6.3),
//! provider `override` (overwrite, §12.3), claim → handle template propagation (§7 step 11)
//! and provider `match` (§6.2); plus the `merge_list_of_dicts` template filter (§5.5).

use serde_json::{Map, Value};

/// Errors from [`merge_list_of_dicts`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum MergeError {
    #[error("merge_list_of_dicts: list item {index} is {found}, not a dict (or None)")]
    NotAMapping { index: usize, found: &'static str },
}

/// What happens where both sides hold a value that cannot be merged further (scalars, or
/// values of different types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MergeMode {
    /// The update's value wins (Poolboy's default, `overwrite=True`).
    Overwrite,
    /// The target's value is kept; only missing keys and list elements are added
    /// (`overwrite=False`, provider defaults).
    KeepExisting,
}

/// Deep-merges `update` into `target`:
/// - objects: keys missing in `target` are added; keys on both sides are merged recursively;
/// - arrays: merged index by index; update elements beyond the target's length are appended
///   one by one (Poolboy appends the whole update list once per extra element, §16; fixed);
/// - anything else (scalars, `null`, type mismatches): replaced by the update with
///   [`MergeMode::Overwrite`], left alone with [`MergeMode::KeepExisting`].
///
/// Keys present only in `target` always remain. The rule is the same at the top level as
/// below it (Poolboy does nothing when the two top-level values are not both objects or both
/// lists; every caller passes objects, which the CRD schemas guarantee).
pub(crate) fn deep_merge(target: &mut Value, update: &Value, mode: MergeMode) {
    match (target, update) {
        (Value::Object(target), Value::Object(update)) => {
            for (key, value) in update {
                match target.get_mut(key) {
                    Some(existing) => deep_merge(existing, value, mode),
                    None => {
                        target.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Array(target), Value::Array(update)) => {
            for (index, value) in update.iter().enumerate() {
                match target.get_mut(index) {
                    Some(existing) => deep_merge(existing, value, mode),
                    None => target.push(value.clone()),
                }
            }
        }
        (target, update) => {
            if mode == MergeMode::Overwrite {
                *target = update.clone();
            }
        }
    }
}

/// The `merge_list_of_dicts` template filter (§5.5): a left-to-right shallow merge of a list
/// of mappings, later keys winning; `null` items count as `{}` and `[]` gives `{}`.
///
/// The template environment registers it as a filter. Poolboy returns a
/// single-item list's item unchanged (so `[null]` gives `null` and `[5]` gives `5`); this always
/// returns a mapping and rejects non-mapping items with an error naming the item.
pub(crate) fn merge_list_of_dicts(items: &[Value]) -> Result<Value, MergeError> {
    let mut merged = Map::new();
    for (index, item) in items.iter().enumerate() {
        match item {
            Value::Object(map) => {
                for (key, value) in map {
                    merged.insert(key.clone(), value.clone());
                }
            }
            Value::Null => {}
            other => {
                return Err(MergeError::NotAMapping {
                    index,
                    found: type_name(other),
                });
            }
        }
    }
    Ok(Value::Object(merged))
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn merged(mut target: Value, update: Value, mode: MergeMode) -> Value {
        deep_merge(&mut target, &update, mode);
        target
    }

    #[test]
    fn objects_merge_recursively_and_keep_target_only_keys() {
        let out = merged(
            json!({"a": {"x": 1, "y": 2}, "keep": true}),
            json!({"a": {"y": 3, "z": 4}, "new": "n"}),
            MergeMode::Overwrite,
        );
        assert_eq!(
            out,
            json!({"a": {"x": 1, "y": 3, "z": 4}, "keep": true, "new": "n"})
        );
    }

    #[test]
    fn overwrite_replaces_scalars_nulls_and_type_mismatches() {
        let out = merged(
            json!({"s": "old", "n": null, "t": {"deep": 1}, "l": [1]}),
            json!({"s": "new", "n": 5, "t": "flat", "l": {"k": 1}}),
            MergeMode::Overwrite,
        );
        assert_eq!(out, json!({"s": "new", "n": 5, "t": "flat", "l": {"k": 1}}));
        assert_eq!(
            merged(json!({"a": 1}), json!({"a": null}), MergeMode::Overwrite),
            json!({"a": null})
        );
    }

    #[test]
    fn keep_existing_only_adds_what_is_missing() {
        let out = merged(
            json!({"s": "old", "n": null, "t": {"deep": 1}, "obj": {"a": 1}}),
            json!({"s": "new", "n": 5, "t": "flat", "obj": {"a": 2, "b": 3}, "added": [1]}),
            MergeMode::KeepExisting,
        );
        assert_eq!(
            out,
            json!({"s": "old", "n": null, "t": {"deep": 1}, "obj": {"a": 1, "b": 3}, "added": [1]})
        );
    }

    #[test]
    fn lists_merge_index_wise_in_both_modes() {
        let target = json!({"l": [{"a": 1}, 2, [3]]});
        let update = json!({"l": [{"b": 1}, 20, [30, 31]]});
        assert_eq!(
            merged(target.clone(), update.clone(), MergeMode::Overwrite),
            json!({"l": [{"a": 1, "b": 1}, 20, [30, 31]]})
        );
        assert_eq!(
            merged(target, update, MergeMode::KeepExisting),
            json!({"l": [{"a": 1, "b": 1}, 2, [3, 31]]})
        );
    }

    #[test]
    fn extra_update_elements_are_appended_one_by_one() {
        // Poolboy would append the whole update list per extra element: [1, [9, 8, 7], [9, 8, 7]].
        assert_eq!(
            merged(json!([1]), json!([9, 8, 7]), MergeMode::Overwrite),
            json!([9, 8, 7])
        );
        assert_eq!(
            merged(json!([1]), json!([9, 8, 7]), MergeMode::KeepExisting),
            json!([1, 8, 7])
        );
        assert_eq!(
            merged(
                json!({"l": []}),
                json!({"l": [{"a": 1}]}),
                MergeMode::KeepExisting
            ),
            json!({"l": [{"a": 1}]})
        );
    }

    #[test]
    fn shorter_update_lists_leave_the_tail() {
        assert_eq!(
            merged(json!([1, 2, 3]), json!([9]), MergeMode::Overwrite),
            json!([9, 2, 3])
        );
    }

    #[test]
    fn top_level_follows_the_same_rule() {
        assert_eq!(
            merged(json!({"a": 1}), json!("s"), MergeMode::Overwrite),
            json!("s")
        );
        assert_eq!(
            merged(json!({"a": 1}), json!("s"), MergeMode::KeepExisting),
            json!({"a": 1})
        );
    }

    #[test]
    fn merge_list_of_dicts_is_a_shallow_left_to_right_merge() {
        let items = [
            json!({"a": "A", "b": "X", "deep": {"x": 1}}),
            Value::Null,
            json!({"b": "B", "deep": {"y": 2}}),
            json!({}),
        ];
        assert_eq!(
            merge_list_of_dicts(&items).expect("mappings"),
            json!({"a": "A", "b": "B", "deep": {"y": 2}})
        );
        assert_eq!(merge_list_of_dicts(&[]).expect("empty"), json!({}));
        assert_eq!(
            merge_list_of_dicts(&[Value::Null]).expect("null"),
            json!({})
        );
        assert_eq!(
            merge_list_of_dicts(&[json!({"a": "A"})]).expect("one"),
            json!({"a": "A"})
        );
    }

    #[test]
    fn merge_list_of_dicts_rejects_non_mappings() {
        let err = merge_list_of_dicts(&[json!({}), json!([1])]).expect_err("a list item");
        assert!(
            matches!(
                err,
                MergeError::NotAMapping {
                    index: 1,
                    found: "a list"
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("item 1"), "{err}");
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..3).prop_map(Value::from),
            "[ab]{0,1}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[abc]", inner), 0..4)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn merging_a_value_into_itself_changes_nothing(v in json_value()) {
            for mode in [MergeMode::Overwrite, MergeMode::KeepExisting] {
                prop_assert_eq!(merged(v.clone(), v.clone(), mode), v.clone());
            }
        }

        #[test]
        fn overwrite_is_idempotent(t in json_value(), u in json_value()) {
            let once = merged(t, u.clone(), MergeMode::Overwrite);
            prop_assert_eq!(merged(once.clone(), u, MergeMode::Overwrite), once);
        }

        #[test]
        fn keep_existing_never_changes_a_target_scalar(t in json_value(), u in json_value()) {
            // Every leaf the target had is still there with the same value.
            let out = merged(t.clone(), u, MergeMode::KeepExisting);
            prop_assert!(contains_leaves(&out, &t), "{} lost leaves of {}", out, t);
        }
    }

    fn contains_leaves(out: &Value, t: &Value) -> bool {
        match (out, t) {
            (Value::Object(o), Value::Object(t)) => t
                .iter()
                .all(|(k, tv)| o.get(k).is_some_and(|ov| contains_leaves(ov, tv))),
            (Value::Array(o), Value::Array(t)) => {
                o.len() >= t.len() && t.iter().zip(o).all(|(tv, ov)| contains_leaves(ov, tv))
            }
            (o, t) => o == t,
        }
    }
}

//! Taking `metadata.managedFields` out of an object's JSON text without parsing it: the
//! API server writes `metadata` before `spec` and `status`, so a scan that stops at the end of
//! `managedFields` reads the object's head alone, and the rest is copied as it came.

use super::scan::{skip_string, skip_value, skip_whitespace};

/// `object` without `metadata.managedFields`: the API server's record of which client set which
/// field, as deep as the object and often half its bytes. No decision of the broker reads them
/// (the stores drop them too, as Poolboy's cache does), so kube need not decode them. `None`
/// when there are none to take out, or `object` is not a JSON object with an object for its
/// metadata (it then goes on as it came, and kube's decode says what is wrong with it).
pub(crate) fn without_managed_fields(object: &str) -> Option<String> {
    let text = object.as_bytes();
    let metadata = member_value(text, object_start(text, 0)?, b"metadata")?;
    let cut = member_span(text, object_start(text, metadata)?, b"managedFields")?;
    let mut out = String::with_capacity(object.len() - (cut.end - cut.start));
    out.push_str(&object[..cut.start]);
    out.push_str(&object[cut.end..]);
    Some(out)
}

/// Where the members of the object at `at` (after whitespace) begin: just past its `{`.
fn object_start(text: &[u8], at: usize) -> Option<usize> {
    let at = skip_whitespace(text, at);
    (text.get(at) == Some(&b'{')).then_some(at + 1)
}

/// Where the value of member `key` of the object whose members begin at `members` starts.
fn member_value(text: &[u8], members: usize, key: &[u8]) -> Option<usize> {
    let mut scan = MemberScan::new(text, members);
    while let Some(member) = scan.next_member()? {
        if member.key == key {
            return Some(member.value);
        }
    }
    None
}

/// The bytes to cut to take member `key` out of the object whose members begin at `members`:
/// the member and the comma that joined it to its neighbours (the one before it, or for a
/// first member the one after it).
fn member_span(text: &[u8], members: usize, key: &[u8]) -> Option<std::ops::Range<usize>> {
    let mut scan = MemberScan::new(text, members);
    let mut previous_end = None;
    while let Some(member) = scan.next_member()? {
        let end = scan.skip_value()?;
        if member.key == key {
            return Some(match previous_end {
                Some(previous_end) => previous_end..end,
                None => {
                    let after = skip_whitespace(text, end);
                    match text.get(after) {
                        Some(b',') => member.start..after + 1,
                        _ => member.start..end,
                    }
                }
            });
        }
        previous_end = Some(end);
    }
    None
}

/// One member of an object: where its key's quote is, the key as written, and where its
/// value starts.
struct Member<'t> {
    start: usize,
    key: &'t [u8],
    value: usize,
}

/// The members of one object, read key by key; a value is skipped only when the next member
/// is asked for (or by [`MemberScan::skip_value`]), so a caller that stops at a member can read
/// into its value.
struct MemberScan<'t> {
    text: &'t [u8],
    /// Just past the object's `{`, or past the last value skipped.
    at: usize,
    /// The start of the last member's value, not skipped yet.
    unskipped: Option<usize>,
    first: bool,
}

impl<'t> MemberScan<'t> {
    fn new(text: &'t [u8], members: usize) -> Self {
        Self {
            text,
            at: members,
            unskipped: None,
            first: true,
        }
    }

    /// Skips the last member's value; just past it.
    fn skip_value(&mut self) -> Option<usize> {
        if let Some(value) = self.unskipped.take() {
            self.at = skip_value(self.text, value)?;
        }
        Some(self.at)
    }

    /// The next member, `Some(None)` at the object's end; `None` when the text is no object.
    fn next_member(&mut self) -> Option<Option<Member<'t>>> {
        let text = self.text;
        let mut at = skip_whitespace(text, self.skip_value()?);
        match (text.get(at)?, self.first) {
            (b'}', _) => return Some(None),
            (b',', false) => at = skip_whitespace(text, at + 1),
            (b'"', true) => {}
            _ => return None,
        }
        self.first = false;
        if text.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = skip_string(text, at)?;
        let colon = skip_whitespace(text, key_end);
        if text.get(colon) != Some(&b':') {
            return None;
        }
        let value = skip_whitespace(text, colon + 1);
        self.unskipped = Some(value);
        Some(Some(Member {
            start: at,
            key: &text[at + 1..key_end - 1],
            value,
        }))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::without_managed_fields;

    /// What taking the managed fields out must leave, read as JSON.
    fn expected(object: &Value) -> Value {
        let mut object = object.clone();
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.shift_remove("managedFields");
        }
        object
    }

    #[test]
    fn the_managed_fields_go_wherever_they_sit_in_the_metadata() {
        let fields = json!([{"manager": "poolboy", "fieldsV1": {"f:spec": {"f:x": {}}}}]);
        for metadata in [
            json!({"name": "a", "managedFields": fields, "resourceVersion": "1"}),
            json!({"managedFields": fields, "name": "a"}),
            json!({"name": "a", "managedFields": fields}),
            json!({"managedFields": fields}),
        ] {
            let object = json!({"kind": "K", "metadata": metadata, "spec": {"managedFields": 1}});
            let text = serde_json::to_string(&object).expect("JSON");
            let stripped = without_managed_fields(&text).expect("stripped");
            let stripped: Value = serde_json::from_str(&stripped).expect("still JSON");
            assert_eq!(stripped, expected(&object), "{text}");
        }
        let spaced = "{ \"metadata\" : { \"name\" : \"a\" , \"managedFields\" : [ ] } }";
        assert_eq!(
            without_managed_fields(spaced).as_deref(),
            Some("{ \"metadata\" : { \"name\" : \"a\" } }")
        );
    }

    #[test]
    fn anything_else_is_left_as_it_came() {
        for text in [
            r#"{"kind":"K","metadata":{"name":"a"},"spec":{"managedFields":[]}}"#,
            r#"{"kind":"K","spec":{"metadata":{"managedFields":[]}}}"#,
            r#"{"metadata":"text"}"#,
            r#"[{"metadata":{"managedFields":[]}}]"#,
            r#"{"kind":"Status","status":"Success"}"#,
            "not json",
            "",
            r#"{"metadata":{"managedFields":[{"a":"]"#,
        ] {
            assert_eq!(without_managed_fields(text), None, "{text}");
        }
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-z\"\\\\{}\\[\\],: ]{0,6}".prop_map(Value::String),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-zF\"\\\\]{0,5}", inner), 0..4)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever the object holds (keys and strings with quotes, brackets and
        /// backslashes), only `metadata.managedFields` goes.
        #[test]
        fn only_the_metadatas_managed_fields_go(
            before in prop::collection::vec(("[a-z\"]{0,4}", value()), 0..3),
            metadata in prop::collection::vec(("[a-z\"]{0,4}", value()), 0..4),
            fields in value(),
            at in 0usize..4,
            after in prop::collection::vec(("[a-z]{0,4}", value()), 0..3),
        ) {
            let mut metadata: serde_json::Map<String, Value> = metadata.into_iter().collect();
            metadata.shift_remove("managedFields");
            metadata.shift_insert(at.min(metadata.len()), "managedFields".to_owned(), fields);
            let mut object: serde_json::Map<String, Value> =
                before.into_iter().filter(|(k, _)| k != "metadata").collect();
            object.insert("metadata".to_owned(), Value::Object(metadata));
            for (key, value) in after {
                object.entry(key).or_insert(value);
            }
            let object = Value::Object(object);
            let text = serde_json::to_string(&object).expect("JSON");
            let stripped = without_managed_fields(&text).expect("stripped");
            let stripped: Value = serde_json::from_str(&stripped).expect("still JSON");
            prop_assert_eq!(stripped, expected(&object));
        }
    }
}

//! One LIST answer cut into pages as it streams in ([`PageCutter`]): the client asks the API
//! server for a watch's first list whole, which it serves from its watch cache, and hands the
//! watcher pages of the size it asked for, each a LIST body of its own, so that no more than a
//! page of the answer is held at once (docs/design.md, "runtime::paged_answers").
//!
//! Each page keeps the answer's members as they came (`kind` and `apiVersion`; a list of a
//! custom resource writes them around `items`, in key order), with a `metadata` of its own:
//! the answer's with a `continue` token when more pages follow; the last page carries the
//! answer's `metadata` as it came, with its `resourceVersion`, which the watcher watches from.

use serde_json::{Map, Value};

use super::scan::{skip_string, skip_value, skip_whitespace};

/// Why an answer cannot be cut into pages.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CutError {
    #[error("the list answer is not a JSON object with an `items` array (at byte {0})")]
    Malformed(usize),
    #[error("the list answer ended before it was complete")]
    Truncated,
    #[error("the list answer's metadata is not a JSON object: {0}")]
    Metadata(String),
}

/// Cuts one LIST answer, pushed in as it arrives, into pages of at most `limit` items.
pub(crate) struct PageCutter {
    /// What arrived and was not read yet, from `at` on.
    text: Vec<u8>,
    at: usize,
    /// The bytes dropped from before `text`, to place an error in the answer.
    dropped: usize,
    state: State,
    /// The answer's members other than `items`, each as `"key"` and value, as written.
    members: Vec<(Vec<u8>, Vec<u8>)>,
    /// The items of the page being cut, joined by commas.
    items: Vec<u8>,
    count: usize,
    limit: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Start,
    Members {
        first: bool,
    },
    Items {
        first: bool,
    },
    /// The answer's object is closed: the rest is whitespace until the body ends.
    Closed,
    /// The last page was cut.
    Done,
}

/// One page's items; [`PageCutter::body`] makes them a LIST body.
#[derive(Debug)]
pub(crate) struct Page {
    items: Vec<u8>,
    /// No page follows.
    pub(crate) last: bool,
}

impl PageCutter {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            text: Vec::new(),
            at: 0,
            dropped: 0,
            state: State::Start,
            members: Vec::new(),
            items: Vec::new(),
            count: 0,
            limit: limit.max(1),
        }
    }

    /// Takes in the next bytes of the answer.
    pub(crate) fn push(&mut self, data: &[u8]) {
        // Everything before `at` was copied out: only an unfinished value is kept.
        self.text.drain(..self.at);
        self.dropped += self.at;
        self.at = 0;
        self.text.extend_from_slice(data);
    }

    /// The next page, once the answer holds it and tells whether more follow; `None` until
    /// then. `ended`: the answer has no more bytes to come. The last page waits for the end
    /// of the answer, so that its connection goes back to the pool read to the end.
    pub(crate) fn next_page(&mut self, ended: bool) -> Result<Option<Page>, CutError> {
        loop {
            match self.state {
                State::Start => {
                    let Some(at) = self.token(self.at, ended)? else {
                        return Ok(None);
                    };
                    self.expect(at, b'{')?;
                    self.at = at + 1;
                    self.state = State::Members { first: true };
                }
                State::Members { first } => {
                    let Some(mut at) = self.token(self.at, ended)? else {
                        return Ok(None);
                    };
                    match self.text[at] {
                        b'}' => {
                            self.at = at + 1;
                            self.state = State::Closed;
                            continue;
                        }
                        b',' if !first => match self.token(at + 1, ended)? {
                            Some(next) => at = next,
                            None => return Ok(None),
                        },
                        _ if first => {}
                        _ => return Err(self.malformed(at)),
                    }
                    self.expect(at, b'"')?;
                    let Some(key_end) = self.complete(skip_string(&self.text, at), ended)? else {
                        return Ok(None);
                    };
                    let Some(colon) = self.token(key_end, ended)? else {
                        return Ok(None);
                    };
                    self.expect(colon, b':')?;
                    let Some(value) = self.token(colon + 1, ended)? else {
                        return Ok(None);
                    };
                    let items = &self.text[at + 1..key_end - 1] == b"items";
                    if items && self.text[value] == b'[' {
                        self.at = value + 1;
                        self.state = State::Items { first: true };
                        continue;
                    }
                    let Some(end) = self.value_end(value, ended)? else {
                        return Ok(None);
                    };
                    // `items: null` (an empty list, to kube) is left out: the pages say `[]`.
                    if !items {
                        let member = (
                            self.text[at..key_end].to_vec(),
                            self.text[value..end].to_vec(),
                        );
                        self.members.push(member);
                    }
                    self.at = end;
                    self.state = State::Members { first: false };
                }
                State::Items { first } => {
                    let Some(mut at) = self.token(self.at, ended)? else {
                        return Ok(None);
                    };
                    if self.text[at] == b']' {
                        self.at = at + 1;
                        self.state = State::Members { first: false };
                        continue;
                    }
                    if !first {
                        self.expect(at, b',')?;
                        match self.token(at + 1, ended)? {
                            Some(next) => at = next,
                            None => return Ok(None),
                        }
                    }
                    if self.count == self.limit {
                        // A full page, and an item after it: the page is not the last.
                        self.at = at;
                        self.state = State::Items { first: true };
                        return Ok(Some(self.take_page(false)));
                    }
                    let Some(end) = self.value_end(at, ended)? else {
                        return Ok(None);
                    };
                    if self.count > 0 {
                        self.items.push(b',');
                    }
                    self.items.extend_from_slice(&self.text[at..end]);
                    self.count += 1;
                    self.at = end;
                    self.state = State::Items { first: false };
                }
                State::Closed => {
                    let rest = skip_whitespace(&self.text, self.at);
                    if rest < self.text.len() {
                        return Err(self.malformed(rest));
                    }
                    self.at = rest;
                    if !ended {
                        return Ok(None);
                    }
                    self.state = State::Done;
                    return Ok(Some(self.take_page(true)));
                }
                State::Done => return Ok(None),
            }
        }
    }

    /// `page` as a LIST body: the answer's members, its `metadata` (with `continue_token`
    /// when one is given) and the page's items.
    pub(crate) fn body(
        &self,
        page: &Page,
        continue_token: Option<&str>,
    ) -> Result<Vec<u8>, CutError> {
        let metadata = self
            .members
            .iter()
            .find(|(key, _)| key.as_slice() == b"\"metadata\"")
            .map(|(_, value)| value.as_slice());
        let metadata = match (metadata, continue_token) {
            (Some(metadata), None) => metadata.to_vec(),
            (None, None) => b"{}".to_vec(),
            (metadata, Some(token)) => {
                let mut fields: Map<String, Value> = match metadata {
                    Some(metadata) => serde_json::from_slice(metadata)
                        .map_err(|error| CutError::Metadata(error.to_string()))?,
                    None => Map::new(),
                };
                fields.insert("continue".to_owned(), Value::from(token));
                serde_json::to_vec(&fields)
                    .map_err(|error| CutError::Metadata(error.to_string()))?
            }
        };
        let mut body = Vec::with_capacity(page.items.len() + metadata.len() + 128);
        body.push(b'{');
        for (key, value) in &self.members {
            if key.as_slice() != b"\"metadata\"" {
                body.extend_from_slice(key);
                body.push(b':');
                body.extend_from_slice(value);
                body.push(b',');
            }
        }
        body.extend_from_slice(b"\"metadata\":");
        body.extend_from_slice(&metadata);
        body.extend_from_slice(b",\"items\":[");
        body.extend_from_slice(&page.items);
        body.extend_from_slice(b"]}");
        Ok(body)
    }

    fn take_page(&mut self, last: bool) -> Page {
        self.count = 0;
        Page {
            items: std::mem::take(&mut self.items),
            last,
        }
    }

    /// Where the next token after whitespace from `at` is; `None` when it has not arrived.
    fn token(&self, at: usize, ended: bool) -> Result<Option<usize>, CutError> {
        let at = skip_whitespace(&self.text, at);
        self.complete((at < self.text.len()).then_some(at), ended)
    }

    /// Just past the value at `value`, once all of it has arrived: a number or literal is
    /// complete only when something follows it.
    fn value_end(&self, value: usize, ended: bool) -> Result<Option<usize>, CutError> {
        match skip_value(&self.text, value) {
            Some(end)
                if end < self.text.len()
                    || ended
                    || matches!(self.text[value], b'"' | b'{' | b'[') =>
            {
                Ok(Some(end))
            }
            // A number or literal that the next bytes may go on with.
            Some(_) => Ok(None),
            None => self.complete(None, ended),
        }
    }

    /// `found`, or why not: not yet arrived, or never will.
    fn complete(&self, found: Option<usize>, ended: bool) -> Result<Option<usize>, CutError> {
        match found {
            None if ended => Err(CutError::Truncated),
            found => Ok(found),
        }
    }

    fn expect(&self, at: usize, byte: u8) -> Result<(), CutError> {
        if self.text[at] == byte {
            Ok(())
        } else {
            Err(self.malformed(at))
        }
    }

    fn malformed(&self, at: usize) -> CutError {
        CutError::Malformed(self.dropped + at)
    }
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;
    use kube::core::ObjectList;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::{CutError, PageCutter};

    /// The pages `answer` is cut into, pushed in `chunks` (cut at the given offsets), each
    /// with the continue token `t<n>` when one follows.
    fn pages(answer: &str, limit: usize, cuts: &[usize]) -> Result<Vec<Value>, CutError> {
        let bytes = answer.as_bytes();
        let mut offsets: Vec<usize> = cuts.iter().map(|cut| cut % (bytes.len() + 1)).collect();
        offsets.push(bytes.len());
        offsets.sort_unstable();
        let mut cutter = PageCutter::new(limit);
        let mut pages = Vec::new();
        let mut from = 0;
        let mut chunks = offsets.into_iter();
        let mut ended = false;
        loop {
            while let Some(page) = cutter.next_page(ended)? {
                let token = (!page.last).then(|| format!("t{}", pages.len()));
                let body = cutter.body(&page, token.as_deref())?;
                pages.push(serde_json::from_slice(&body).expect("a page is JSON"));
                if page.last {
                    return Ok(pages);
                }
            }
            assert!(!ended, "an ended answer gives a page or an error");
            match chunks.next() {
                Some(to) => {
                    cutter.push(&bytes[from..to]);
                    from = to;
                }
                None => ended = true,
            }
        }
    }

    fn item(name: &str) -> Value {
        json!({"metadata": {"name": name, "annotations": {"q": "a \"}]\\\" b", "e": "{["}},
               "data": {"k": [1, {"x": null}], "n": -1.5e3}})
    }

    #[test]
    fn a_typed_list_is_cut_into_pages_that_carry_its_kind_and_continue() {
        let items: Vec<Value> = (0..5).map(|i| item(&format!("c{i}"))).collect();
        let answer = json!({"kind": "ConfigMapList", "apiVersion": "v1",
                            "metadata": {"resourceVersion": "42"}, "items": items});
        let pages = pages(&answer.to_string(), 2, &[]).expect("pages");
        assert_eq!(pages.len(), 3);
        assert_eq!(
            pages[0],
            json!({"kind": "ConfigMapList", "apiVersion": "v1",
                   "metadata": {"resourceVersion": "42", "continue": "t0"},
                   "items": items[..2]})
        );
        assert_eq!(pages[1]["metadata"]["continue"], "t1");
        assert_eq!(
            pages[2],
            json!({"kind": "ConfigMapList", "apiVersion": "v1",
                   "metadata": {"resourceVersion": "42"}, "items": items[4..]})
        );
    }

    #[test]
    fn a_custom_resource_lists_kind_and_version_come_with_its_last_page_and_kube_reads_each_page() {
        // The API server writes an unstructured list's members in key order.
        let answer = r#"{"apiVersion":"poolboy.gpte.redhat.com/v1","items":[{"kind":"ResourceHandle","metadata":{"name":"a"}},{"kind":"ResourceHandle","metadata":{"name":"b"}}],"kind":"ResourceHandleList","metadata":{"continue":"","resourceVersion":"7"}}
"#;
        let pages = pages(answer, 1, &[3, 70, 71, 150]).expect("pages");
        assert_eq!(pages.len(), 2);
        assert_eq!(pages[0]["metadata"], json!({"continue": "t0"}));
        assert_eq!(
            pages[1]["metadata"],
            json!({"continue": "", "resourceVersion": "7"})
        );
        for page in &pages {
            let list: ObjectList<DynamicObject> =
                serde_json::from_value(page.clone()).expect("kube decodes a page");
            assert_eq!(list.items.len(), 1);
        }
        let last: ObjectList<DynamicObject> =
            serde_json::from_value(pages[1].clone()).expect("kube decodes the last page");
        assert_eq!(last.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(last.types.kind, "ResourceHandleList");
    }

    #[test]
    fn an_empty_list_is_one_page() {
        for answer in [
            r#"{"kind":"L","metadata":{"resourceVersion":"3"},"items":[]}"#,
            r#"{"kind":"L","metadata":{"resourceVersion":"3"},"items":null}"#,
            r#" { "kind" : "L" , "metadata" : { "resourceVersion" : "3" } , "items" : [ ] } "#,
        ] {
            let pages = pages(answer, 500, &[1, 9]).expect("pages");
            assert_eq!(
                pages,
                vec![json!({"kind": "L", "metadata": {"resourceVersion": "3"}, "items": []})],
                "{answer}"
            );
        }
    }

    #[test]
    fn an_answer_that_is_not_a_list_or_ends_early_is_an_error() {
        for (answer, error) in [
            ("[1,2]", CutError::Malformed(0)),
            (r#"{"items":[{"a":1}] x"#, CutError::Malformed(19)),
            (r#"{"items":[{"a":1} {"b":2}]}"#, CutError::Malformed(18)),
            (r#"{"items":[{"a":1},"#, CutError::Truncated),
            (r#"{"items":[{"a":"#, CutError::Truncated),
            ("", CutError::Truncated),
        ] {
            assert_eq!(pages(answer, 5, &[4]).err(), Some(error), "{answer}");
        }
        let metadata = r#"{"metadata":[1],"items":[{"a":1},{"a":2}]}"#;
        assert!(matches!(
            pages(metadata, 1, &[]),
            Err(CutError::Metadata(_))
        ));
    }

    #[test]
    fn the_cutter_keeps_no_more_than_an_unfinished_item() {
        let items: Vec<String> = (0..200)
            .map(|i| item(&format!("c{i}")).to_string())
            .collect();
        let answer = format!(
            r#"{{"kind":"L","metadata":{{"resourceVersion":"1"}},"items":[{}]}}"#,
            items.join(",")
        );
        let mut cutter = PageCutter::new(10);
        let mut largest = 0;
        let mut handed = 0;
        for chunk in answer.as_bytes().chunks(64) {
            cutter.push(chunk);
            while let Some(page) = cutter.next_page(false).expect("cut") {
                handed += page.items.len();
            }
            largest = largest.max(cutter.text.len() - cutter.at + cutter.items.len());
        }
        assert!(
            cutter
                .next_page(true)
                .expect("the last page")
                .is_some_and(|page| page.last)
        );
        assert!(handed > 0);
        let page_and_item = 11 * items[0].len() + 64;
        assert!(largest <= page_and_item, "{largest} > {page_and_item}");
    }

    fn member_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            "[a-z\"\\\\{}\\[\\],: ]{0,6}".prop_map(Value::String),
            any::<i32>().prop_map(Value::from),
            Just(json!({"a": [1, "]}"]})),
        ]
    }

    proptest! {
        /// However the answer arrives and wherever its members sit, the pages hold its items
        /// in order, `limit` to a page, and only the last has no `continue` and the answer's
        /// own metadata.
        #[test]
        fn the_pages_hold_the_items_in_order(
            names in prop::collection::vec("[a-z\"\\\\{}\\[\\], ]{0,8}", 0..12),
            limit in 1usize..5,
            metadata_first in any::<bool>(),
            extra_first in any::<bool>(),
            extra in prop::collection::vec(("[a-z]{1,4}", member_value()), 0..3),
            cuts in prop::collection::vec(0usize..4000, 0..10),
        ) {
            let items: Vec<Value> = names.iter().map(|name| item(name)).collect();
            let metadata = json!({"resourceVersion": "9", "remainingItemCount": 0});
            let mut answer = serde_json::Map::new();
            let extra: serde_json::Map<String, Value> = extra
                .into_iter()
                .filter(|(key, _)| key != "items" && key != "metadata")
                .collect();
            if extra_first {
                answer.extend(extra.clone());
            }
            if metadata_first {
                answer.insert("metadata".to_owned(), metadata.clone());
                answer.insert("items".to_owned(), Value::from(items.clone()));
            } else {
                answer.insert("items".to_owned(), Value::from(items.clone()));
                answer.insert("metadata".to_owned(), metadata.clone());
            }
            if !extra_first {
                answer.extend(extra.clone());
            }
            let text = Value::Object(answer).to_string();
            let pages = pages(&text, limit, &cuts).expect("pages");
            let expected_pages = items.len().div_ceil(limit).max(1);
            prop_assert_eq!(pages.len(), expected_pages);
            let mut seen = Vec::new();
            for (i, page) in pages.iter().enumerate() {
                let page_items = page["items"].as_array().expect("items");
                let last = i + 1 == pages.len();
                if last {
                    prop_assert_eq!(&page["metadata"], &metadata);
                } else {
                    prop_assert_eq!(page_items.len(), limit);
                    prop_assert_eq!(&page["metadata"]["continue"], &json!(format!("t{i}")));
                }
                // Members written after the items are known from the last page on.
                for (key, value) in &extra {
                    let known = if extra_first || last { value } else { &Value::Null };
                    prop_assert_eq!(&page[key], known);
                }
                seen.extend(page_items.iter().cloned());
            }
            prop_assert_eq!(seen, items);
        }
    }
}

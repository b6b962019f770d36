//! The nesting depth of JSON text and the paths inside it, counted on the bytes without
//! recursion: the API server accepts objects nested 10,000 levels deep, and anything that
//! recursed per level (serde into a struct or a `Value`, its Drop, its Clone) would overflow
//! the stack long before that.
//!
//! Every function here assumes text serde_json has already accepted as JSON (the screening
//! captures items as `RawValue`s first); on anything else the answers are merely unspecified.

/// Whether `json` nests containers (`{}`, `[]`) more than `limit` levels deep. A scalar has
/// depth 0, `{}` depth 1, `{"a":[1]}` depth 2. Stops at the first container past `limit`.
pub(crate) fn exceeds(json: &[u8], limit: usize) -> bool {
    let mut depth = 0usize;
    let mut i = 0;
    while i < json.len() {
        match json[i] {
            b'"' => i = string_end(json, i),
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    false
}

/// The index of the closing quote of the string whose opening quote is at `open`
/// (`json.len()` when it is unterminated).
fn string_end(json: &[u8], open: usize) -> usize {
    let mut i = open + 1;
    while i < json.len() {
        match json[i] {
            b'\\' => i += 2,
            b'"' => return i,
            _ => i += 1,
        }
    }
    json.len()
}

/// One step of a path: a member name or an array index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    Key(String),
    Index(usize),
}

/// A container being walked, with the member or element the walk is in.
#[derive(Debug)]
struct Frame {
    /// `Some(key)` in an object (the key of the member being read, empty before the first),
    /// `None` in an array.
    key: Option<String>,
    index: usize,
    /// In an object: the next string is a member name.
    expects_key: bool,
}

impl Frame {
    fn segment(&self) -> Segment {
        match &self.key {
            Some(key) => Segment::Key(key.clone()),
            None => Segment::Index(self.index),
        }
    }
}

/// Walks `json`, keeping the path to the current position, and calls `visit` with the open
/// containers at each container opened and once at `stop` (if given). `visit` returns
/// `true` to end the walk.
fn walk(json: &[u8], stop: Option<usize>, mut visit: impl FnMut(&[Frame]) -> bool) {
    let mut frames: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < json.len() {
        if stop.is_some_and(|stop| i >= stop) {
            visit(&frames);
            return;
        }
        match json[i] {
            b'"' => {
                let end = string_end(json, i);
                if let Some(frame) = frames.last_mut()
                    && frame.key.is_some()
                    && frame.expects_key
                {
                    let raw = &json[i..(end + 1).min(json.len())];
                    let key = serde_json::from_slice::<String>(raw)
                        .unwrap_or_else(|_| String::from_utf8_lossy(raw).into_owned());
                    frame.key = Some(key);
                    frame.expects_key = false;
                }
                i = end;
            }
            open @ (b'{' | b'[') => {
                frames.push(Frame {
                    key: (open == b'{').then(String::new),
                    index: 0,
                    expects_key: open == b'{',
                });
                if visit(&frames) {
                    return;
                }
            }
            b'}' | b']' => {
                frames.pop();
            }
            b',' => {
                if let Some(frame) = frames.last_mut() {
                    frame.index += 1;
                    frame.expects_key = frame.key.is_some();
                }
            }
            _ => {}
        }
        i += 1;
    }
    if stop.is_some() {
        visit(&frames);
    }
}

/// The path (segments from the root) of the container at `frames.last()`.
fn path_of(frames: &[Frame]) -> Vec<Segment> {
    frames[..frames.len().saturating_sub(1)]
        .iter()
        .map(Frame::segment)
        .collect()
}

/// Where `json` first nests more than `limit` levels: the path of the first container past
/// `limit`, preferring one outside `/metadata/managedFields` (the API server's field
/// ownership mirrors the object's own nesting there, which would hide what the user wrote).
pub(crate) fn too_deep_at(json: &[u8], limit: usize) -> Option<Vec<Segment>> {
    let key_is = |frame: &Frame, name: &str| frame.key.as_deref() == Some(name);
    let mut first = None;
    let mut outside = None;
    walk(json, None, |frames| {
        // Only the first container past the limit on each branch: a path is built at most
        // once inside managedFields and once outside.
        if frames.len() != limit + 1 {
            return false;
        }
        let managed_fields = frames.len() > 2
            && key_is(&frames[0], "metadata")
            && key_is(&frames[1], "managedFields");
        if !managed_fields {
            outside = Some(path_of(frames));
            return true;
        }
        if first.is_none() {
            first = Some(path_of(frames));
        }
        false
    });
    outside.or(first)
}

/// The path of the value being read at byte `offset` of `json`: where a decoding error at
/// that offset is.
pub(crate) fn path_at(json: &[u8], offset: usize) -> Vec<Segment> {
    let mut path = Vec::new();
    walk(json, Some(offset), |frames| {
        path = frames.iter().map(Frame::segment).collect();
        false
    });
    path
}

/// A path as a JSON pointer (RFC 6901), with at most `shown` segments: a path deeper than
/// that ends in `/…`.
pub(crate) fn pointer(path: &[Segment], shown: usize) -> String {
    let mut out = String::new();
    for segment in path.iter().take(shown) {
        out.push('/');
        match segment {
            Segment::Key(key) => out.push_str(&key.replace('~', "~0").replace('/', "~1")),
            Segment::Index(index) => out.push_str(&index.to_string()),
        }
    }
    if path.len() > shown {
        out.push_str("/…");
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

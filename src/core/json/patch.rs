//! Poolboy's hand-computed JSON diff (§12.1) and the provider `updateFilters` (§12.2).
//!
//! The diff is reproduced op for op, in Poolboy's order, because `updateFilters` decide per op:
//! a different (if equivalent) patch could be filtered differently. `json-patch` is used only for
//! its types and for applying patches.

use std::borrow::Cow;
use std::fmt;

use fancy_regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use crate::api::OperatorDomain;
use crate::api::provider::UpdateFilter;

#[cfg(test)]
mod tests;

/// Errors from compiling update filters or converting ops to a `json_patch::Patch`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PatchError {
    /// An `updateFilters[index].pathMatch` that does not compile.
    #[error(
        "updateFilters[{index}].pathMatch {pattern:?} is not a valid regular expression: {message}"
    )]
    InvalidFilterRegex {
        index: usize,
        pattern: String,
        message: String,
    },
    /// An `updateFilters[index].allowedOps` entry other than add, remove or replace.
    #[error(
        "updateFilters[{index}] (pathMatch {pattern:?}) allows unknown op {op:?}; allowed ops are add, remove and replace"
    )]
    UnknownFilterOp {
        index: usize,
        pattern: String,
        op: String,
    },
    /// A path that is not an RFC 6901 JSON pointer.
    #[error("{path:?} is not a valid JSON pointer: {message}")]
    InvalidPointer { path: String, message: String },
}

/// The three kinds of op the diff emits (it never emits test, move or copy: §12.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum OpKind {
    Add,
    Remove,
    Replace,
}

impl OpKind {
    /// The RFC 6902 op name, as written in `allowedOps`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            OpKind::Add => "add",
            OpKind::Remove => "remove",
            OpKind::Replace => "replace",
        }
    }

    fn parse(op: &str) -> Option<Self> {
        match op {
            "add" => Some(OpKind::Add),
            "remove" => Some(OpKind::Remove),
            "replace" => Some(OpKind::Replace),
            _ => None,
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One JSON-patch op with an RFC 6901 path; serializes as RFC 6902 (`{"op": "add", ...}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub(crate) enum PatchOp {
    Add { path: String, value: Value },
    Remove { path: String },
    Replace { path: String, value: Value },
}

impl PatchOp {
    /// The op's JSON pointer, escaped as RFC 6901 (`~0`, `~1`).
    pub(crate) fn path(&self) -> &str {
        match self {
            PatchOp::Add { path, .. }
            | PatchOp::Remove { path }
            | PatchOp::Replace { path, .. } => path,
        }
    }

    pub(crate) fn kind(&self) -> OpKind {
        match self {
            PatchOp::Add { .. } => OpKind::Add,
            PatchOp::Remove { .. } => OpKind::Remove,
            PatchOp::Replace { .. } => OpKind::Replace,
        }
    }
}

/// Converts ops to the `json_patch` 4 type that `kube::api::Patch::Json` takes (notes §0.3).
pub(crate) fn to_json_patch(ops: &[PatchOp]) -> Result<json_patch::Patch, PatchError> {
    use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
    let pointer = |path: &str| {
        json_patch::jsonptr::PointerBuf::parse(path).map_err(|e| PatchError::InvalidPointer {
            path: path.to_owned(),
            message: e.to_string(),
        })
    };
    let converted = ops
        .iter()
        .map(|op| {
            Ok(match op {
                PatchOp::Add { path, value } => PatchOperation::Add(AddOperation {
                    path: pointer(path)?,
                    value: value.clone(),
                }),
                PatchOp::Remove { path } => PatchOperation::Remove(RemoveOperation {
                    path: pointer(path)?,
                }),
                PatchOp::Replace { path, value } => PatchOperation::Replace(ReplaceOperation {
                    path: pointer(path)?,
                    value: value.clone(),
                }),
            })
        })
        .collect::<Result<Vec<_>, PatchError>>()?;
    Ok(json_patch::Patch(converted))
}

/// Escapes one path segment as RFC 6901: `~` → `~0`, then `/` → `~1`.
pub(crate) fn escape_pointer_segment(segment: &str) -> Cow<'_, str> {
    if segment.contains(['~', '/']) {
        Cow::Owned(segment.replace('~', "~0").replace('/', "~1"))
    } else {
        Cow::Borrowed(segment)
    }
}

/// Poolboy's `jsonpatch_from_diff(a, b)` (§12.1), op for op and in its order:
/// - objects: `a`'s keys in `a`'s order (recurse when `b` has the key, else `remove`), then `add`
///   for `b`'s new keys in `b`'s order;
/// - arrays: recurse over common indexes, `remove` surplus indexes highest first, then `add`
///   new indexes ascending;
/// - anything else: `replace` when the values differ by [`values_equal`].
pub(crate) fn diff(a: &Value, b: &Value) -> Vec<PatchOp> {
    let mut ops = Vec::new();
    let mut path = String::new();
    diff_into(a, b, &mut path, &mut ops);
    ops
}

fn diff_into(a: &Value, b: &Value, path: &mut String, ops: &mut Vec<PatchOp>) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => diff_objects(a, b, path, ops),
        (Value::Array(a), Value::Array(b)) => diff_arrays(a, b, path, ops),
        _ => {
            if !values_equal(a, b) {
                ops.push(PatchOp::Replace {
                    path: path.clone(),
                    value: b.clone(),
                });
            }
        }
    }
}

fn diff_objects(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    path: &mut String,
    ops: &mut Vec<PatchOp>,
) {
    let base = path.len();
    for (key, a_value) in a {
        push_segment(path, key);
        match b.get(key) {
            Some(b_value) => diff_into(a_value, b_value, path, ops),
            None => ops.push(PatchOp::Remove { path: path.clone() }),
        }
        path.truncate(base);
    }
    for (key, b_value) in b {
        if !a.contains_key(key) {
            push_segment(path, key);
            ops.push(PatchOp::Add {
                path: path.clone(),
                value: b_value.clone(),
            });
            path.truncate(base);
        }
    }
}

fn diff_arrays(a: &[Value], b: &[Value], path: &mut String, ops: &mut Vec<PatchOp>) {
    let base = path.len();
    for (index, (a_item, b_item)) in a.iter().zip(b).enumerate() {
        push_segment(path, &index.to_string());
        diff_into(a_item, b_item, path, ops);
        path.truncate(base);
    }
    // Poolboy 1.12 §12.1: surplus items are removed from the end, highest index first, so each
    // remove is valid when the patch is applied in order.
    for index in (b.len()..a.len()).rev() {
        push_segment(path, &index.to_string());
        ops.push(PatchOp::Remove { path: path.clone() });
        path.truncate(base);
    }
    for (index, b_item) in b.iter().enumerate().skip(a.len()) {
        push_segment(path, &index.to_string());
        ops.push(PatchOp::Add {
            path: path.clone(),
            value: b_item.clone(),
        });
        path.truncate(base);
    }
}

fn push_segment(path: &mut String, segment: &str) {
    path.push('/');
    path.push_str(&escape_pointer_segment(segment));
}

/// Poolboy's (Python's) value equality, used wherever Poolboy compares with `==`/`!=`:
/// numbers compare by value (`1 == 1.0`), objects ignore key order. One deliberate difference:
/// booleans never equal numbers (Python's `True == 1` would hide a `true` → `1` change).
pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => numbers_equal(a, b),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter().all(|(key, a_value)| {
                    b.get(key)
                        .is_some_and(|b_value| values_equal(a_value, b_value))
                })
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| values_equal(a, b))
        }
        _ => a == b,
    }
}

/// Exact numeric comparison, as Python compares int and float (no rounding through f64).
fn numbers_equal(a: &Number, b: &Number) -> bool {
    let integer = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (integer(a), integer(b)) {
        (Some(a), Some(b)) => a == b,
        (Some(i), None) => b.as_f64().is_some_and(|f| float_equals_integer(f, i)),
        (None, Some(i)) => a.as_f64().is_some_and(|f| float_equals_integer(f, i)),
        (None, None) => a.as_f64() == b.as_f64(),
    }
}

fn float_equals_integer(f: f64, i: i128) -> bool {
    // Every finite integral f64 within ±2^64 converts to i128 exactly; anything outside is
    // beyond the range of JSON integers serde_json keeps as integers.
    const LIMIT: f64 = 18_446_744_073_709_551_616.0; // 2^64
    f.is_finite() && f.fract() == 0.0 && f.abs() <= LIMIT && f as i128 == i
}

/// Compiles a user regex anchored at both ends as `^(?:pattern)$`.
///
/// Poolboy does `re.match(pattern + '$')`, which anchors only the last branch of a top-level
/// alternation at the end (`a|b$`); we anchor the whole pattern, as the spec describes it.
/// The raw pattern is compiled first so a syntax error names positions in the author's text.
pub(crate) fn compile_anchored(pattern: &str) -> Result<Regex, String> {
    Regex::new(pattern).map_err(|e| e.to_string())?;
    Regex::new(&format!("^(?:{pattern})$")).map_err(|e| e.to_string())
}

/// One compiled `updateFilters` entry.
#[derive(Clone, Debug)]
struct FilterRule {
    regex: Regex,
    allow_add: bool,
    allow_remove: bool,
    allow_replace: bool,
}

impl FilterRule {
    fn allows(&self, kind: OpKind) -> bool {
        match kind {
            OpKind::Add => self.allow_add,
            OpKind::Remove => self.allow_remove,
            OpKind::Replace => self.allow_replace,
        }
    }
}

/// A provider's compiled `updateFilters` plus the implicit Poolboy-annotation filter (§12.2).
#[derive(Clone, Debug)]
pub(crate) struct UpdateFilters {
    rules: Vec<FilterRule>,
}

impl UpdateFilters {
    /// Compiles the provider's filters in order and appends the implicit last filter
    /// `/metadata/annotations/<escaped D>~1resource-.*` allowing every op.
    pub(crate) fn compile(
        filters: &[UpdateFilter],
        domain: &OperatorDomain,
    ) -> Result<Self, PatchError> {
        let mut rules = Vec::with_capacity(filters.len() + 1);
        for (index, filter) in filters.iter().enumerate() {
            let regex = compile_anchored(&filter.path_match).map_err(|message| {
                PatchError::InvalidFilterRegex {
                    index,
                    pattern: filter.path_match.clone(),
                    message,
                }
            })?;
            let mut rule = FilterRule {
                regex,
                allow_add: false,
                allow_remove: false,
                allow_replace: false,
            };
            match &filter.allowed_ops {
                // Poolboy 1.12 §12.2: allowedOps defaults to all three.
                None => {
                    rule.allow_add = true;
                    rule.allow_remove = true;
                    rule.allow_replace = true;
                }
                Some(ops) => {
                    for op in ops {
                        match OpKind::parse(op) {
                            Some(OpKind::Add) => rule.allow_add = true,
                            Some(OpKind::Remove) => rule.allow_remove = true,
                            Some(OpKind::Replace) => rule.allow_replace = true,
                            None => {
                                return Err(PatchError::UnknownFilterOp {
                                    index,
                                    pattern: filter.path_match.clone(),
                                    op: op.clone(),
                                });
                            }
                        }
                    }
                }
            }
            rules.push(rule);
        }
        let implicit = format!(
            "/metadata/annotations/{}~1resource-.*",
            fancy_regex::escape(domain.group())
        );
        let regex =
            compile_anchored(&implicit).map_err(|message| PatchError::InvalidFilterRegex {
                index: filters.len(),
                pattern: implicit.clone(),
                message,
            })?;
        rules.push(FilterRule {
            regex,
            allow_add: true,
            allow_remove: true,
            allow_replace: true,
        });
        Ok(Self { rules })
    }

    /// Keeps the ops the filters allow, in order: the first filter whose pattern matches the
    /// whole path decides; an op no filter matches is dropped (§12.2).
    pub(crate) fn filter(&self, ops: Vec<PatchOp>) -> Vec<PatchOp> {
        ops.into_iter().filter(|op| self.allows(op)).collect()
    }

    /// Whether one op passes. A pattern that exceeds the regex backtrack limit on this path
    /// decides and rejects: dropping a change is safer than letting a later rule allow it.
    pub(crate) fn allows(&self, op: &PatchOp) -> bool {
        let path = op.path();
        for rule in &self.rules {
            match rule.regex.is_match(path) {
                Ok(true) => return rule.allows(op.kind()),
                Ok(false) => {}
                Err(_) => return false,
            }
        }
        false
    }
}

//! What Python prints, reproduced where Poolboy's output depends on it: `repr()` (one float
//! repr for everything), `pprint.pformat` and `json.dumps`.

pub(crate) mod json;
pub(crate) mod pprint;
pub(crate) mod repr;

//! What the broker holds in memory: the watches it shares between controllers and the stores
//! they fill (objects packed), and the indexes and summaries kept from them event by event. The
//! store reads the API server through its watches and writes nothing.

pub(crate) mod by_handle_uid;
pub(crate) mod claim_index;
pub(crate) mod claim_readers;
pub(crate) mod claim_summaries;
pub(crate) mod deleted_by_claims;
pub(crate) mod free_handles;
pub(crate) mod health;
pub(crate) mod packed;
pub(crate) mod pool_index;
pub(crate) mod relist;
pub(crate) mod render_clocks;
pub(crate) mod shared_watch;
pub(crate) mod unrecorded;

/// A digest of `read`, what a follower compares to tell whether a change concerns it: only
/// equality matters. Serialized whole (a tuple of references to API fields always serializes).
pub(crate) fn digest(read: &impl serde::Serialize) -> u64 {
    let bytes = serde_json::to_vec(read).unwrap_or_default();
    let mut hasher = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(&bytes, &mut hasher);
    std::hash::Hasher::finish(&hasher)
}

//! Compiled schemas shared across reconciles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{OpenApiSchema, SchemaError};

/// Compiled schemas shared across reconciles, so each distinct schema compiles once.
///
/// Keyed by the schema's JSON text in its own key order (key order decides which violation
/// is reported first, so differently ordered schemas are different entries). Holds at most
/// `capacity` schemas and evicts the least recently used one: providers change over time and
/// old versions must not pile up.
#[derive(Debug)]
pub(crate) struct SchemaCache {
    capacity: usize,
    state: Mutex<CacheState>,
}

#[derive(Debug, Default)]
struct CacheState {
    entries: HashMap<String, CacheEntry>,
    clock: u64,
}

#[derive(Debug)]
struct CacheEntry {
    schema: Arc<OpenApiSchema>,
    last_used: u64,
}

impl Default for SchemaCache {
    fn default() -> Self {
        Self::with_capacity(Self::DEFAULT_CAPACITY)
    }
}

impl SchemaCache {
    /// Room for every provider and parameter schema of a large installation.
    pub(crate) const DEFAULT_CAPACITY: usize = 1024;

    /// A cache holding at most `capacity` compiled schemas (at least one).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            state: Mutex::new(CacheState::default()),
        }
    }

    /// The compiled form of `schema`, compiling it on first use. Errors are not cached.
    pub(crate) fn get_or_compile(&self, schema: &Value) -> Result<Arc<OpenApiSchema>, SchemaError> {
        let key = schema.to_string();
        {
            let mut state = self.lock();
            state.clock += 1;
            let now = state.clock;
            if let Some(entry) = state.entries.get_mut(&key) {
                entry.last_used = now;
                return Ok(Arc::clone(&entry.schema));
            }
        }
        // Compile outside the lock; if another thread got there first, keep its copy.
        let compiled = Arc::new(OpenApiSchema::compile(schema)?);
        let mut state = self.lock();
        state.clock += 1;
        let now = state.clock;
        if let Some(entry) = state.entries.get_mut(&key) {
            entry.last_used = now;
            return Ok(Arc::clone(&entry.schema));
        }
        if state.entries.len() >= self.capacity {
            let oldest = state
                .entries
                .iter()
                .min_by_key(|(_, entry)| entry.last_used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                state.entries.remove(&oldest);
            }
        }
        state.entries.insert(
            key,
            CacheEntry {
                schema: Arc::clone(&compiled),
                last_used: now,
            },
        );
        Ok(compiled)
    }

    /// How many compiled schemas are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        // A panic elsewhere while holding the lock leaves the map consistent: keep using it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

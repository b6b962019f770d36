//! The instant each handle's templates last read the clock, by handle uid, so that the passes
//! its own writes cause render at it again until the re-render it asked for (issue 15,
//! `core::template::ClockPin`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};

use crate::api::{ResourceClaim, ResourceHandle};
use crate::core::template::ClockPin;

/// Shared by the handle reconciles.
#[derive(Debug, Default)]
pub(crate) struct RenderClocks {
    pins: Mutex<HashMap<String, ClockPin<RenderInputs>>>,
}

/// What a handle's templates render from, as far as taking the clock's time again goes: the
/// handle's spec and its claim's. Their statuses and the resources' states change with the
/// broker's own writes; a spec changes when someone means it to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RenderInputs {
    handle: Option<i64>,
    claim: Option<(Option<String>, Option<i64>)>,
}

impl RenderInputs {
    pub(crate) fn of(handle: &ResourceHandle, claim: Option<&ResourceClaim>) -> Self {
        Self {
            handle: handle.metadata.generation,
            claim: claim.map(|c| (c.metadata.uid.clone(), c.metadata.generation)),
        }
    }
}

impl RenderClocks {
    /// The instant handle `uid`'s templates render at from `inputs`, at `now`.
    pub(crate) fn render_at(
        &self,
        uid: &str,
        inputs: &RenderInputs,
        now: DateTime<Utc>,
    ) -> DateTime<Utc> {
        ClockPin::render_at(self.lock().get(uid), inputs, now)
    }

    /// The templates of handle `uid` rendered from `inputs` at `at` ask to be rendered again
    /// `until` then; `None`: the clock cannot change them.
    pub(crate) fn record(
        &self,
        uid: &str,
        inputs: RenderInputs,
        at: DateTime<Utc>,
        until: Option<DateTime<Utc>>,
    ) {
        let mut pins = self.lock();
        match until {
            Some(until) => {
                pins.insert(uid.to_owned(), ClockPin::new(inputs, at, until));
            }
            None => {
                pins.remove(uid);
            }
        }
    }

    /// Handle `uid` is on its way out.
    pub(crate) fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, ClockPin<RenderInputs>>> {
        self.pins.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

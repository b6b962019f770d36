//! The instant each handle's templates last read the clock, by handle uid, so that the passes
//! its own writes cause render at it again until the re-render it asked for
//! (`core::template::ClockPin`). A deleted handle's pin goes with its watch's delete event.

use chrono::{DateTime, Utc};

use crate::api::kinds::HandleObject;
use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle};
use crate::core::template::ClockPin;
use crate::store::by_handle_uid::ByHandleUid;
use crate::store::shared_watch::SharedWatch;

/// Shared by the handle watch (which it follows) and the handle reconciles. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct RenderClocks {
    pins: ByHandleUid<ClockPin<RenderInputs>>,
}

/// What a handle's templates render from, as far as taking the clock's time again goes: the
/// handle's spec and its claim's, and whether the claim is paused (§7.6). Their statuses and
/// the resources' states change with the broker's own writes; a spec changes, and a claim is
/// paused or resumed, when someone means it to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RenderInputs {
    handle: Option<i64>,
    claim: Option<ClaimInputs>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ClaimInputs {
    uid: Option<String>,
    generation: Option<i64>,
    ignored: bool,
}

impl RenderInputs {
    pub(crate) fn of(
        handle: &ResourceHandle,
        claim: Option<&ResourceClaim>,
        domain: &OperatorDomain,
    ) -> Self {
        Self {
            handle: handle.metadata.generation,
            claim: claim.map(|c| ClaimInputs {
                uid: c.metadata.uid.clone(),
                generation: c.metadata.generation,
                ignored: domain.ignores(&c.metadata),
            }),
        }
    }
}

impl RenderClocks {
    /// Pins that follow `handles`: a deleted handle's goes.
    pub(crate) fn following(handles: &mut SharedWatch<HandleObject>) -> Self {
        Self {
            pins: ByHandleUid::following(handles),
        }
    }

    /// The instant handle `uid`'s templates render at from `inputs`, at `now`.
    pub(crate) fn render_at(
        &self,
        uid: &str,
        inputs: &RenderInputs,
        now: DateTime<Utc>,
    ) -> DateTime<Utc> {
        ClockPin::render_at(self.pins.lock().get(uid), inputs, now)
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
        let mut pins = self.pins.lock();
        match until {
            Some(until) => {
                pins.insert(uid.to_owned(), ClockPin::new(inputs, at, until));
            }
            None => {
                pins.remove(uid);
            }
        }
    }

    /// Handle `uid` is on its way out, or paused: its next pass takes the clock's time.
    pub(crate) fn forget(&self, uid: &str) {
        self.pins.forget(uid);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn handle() -> ResourceHandle {
        serde_json::from_value(json!({"metadata": {"name": "guid-a", "generation": 1},
            "spec": {}}))
        .expect("a handle")
    }

    fn claim(labels: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(
            json!({"metadata": {"name": "c", "uid": "u", "generation": 2,
            "labels": labels}, "spec": {}}),
        )
        .expect("a claim")
    }

    fn at(timestamp: &str) -> DateTime<Utc> {
        timestamp.parse().expect("a timestamp")
    }

    #[test]
    fn a_claim_paused_or_resumed_takes_the_clock_time_again() {
        let domain = OperatorDomain::default();
        let clocks = RenderClocks::default();
        let running = RenderInputs::of(&handle(), Some(&claim(json!({}))), &domain);
        let rendered = at("2026-11-27T10:00:00Z");
        clocks.record(
            "u",
            running.clone(),
            rendered,
            Some(at("2026-11-27T10:01:00Z")),
        );
        let now = at("2026-11-27T10:00:30Z");
        assert_eq!(
            clocks.render_at("u", &running, now),
            rendered,
            "its own writes"
        );

        let paused = RenderInputs::of(
            &handle(),
            Some(&claim(json!({"poolboy.gpte.redhat.com/ignore": ""}))),
            &domain,
        );
        assert_ne!(paused, running);
        assert_eq!(clocks.render_at("u", &paused, now), now);

        clocks.forget("u");
        assert_eq!(clocks.render_at("u", &running, now), now);
    }

    #[test]
    fn a_deleted_handle_takes_its_pin_with_it() {
        let clocks = RenderClocks::default();
        let inputs = RenderInputs::of(&handle(), None, &OperatorDomain::default());
        let rendered = at("2026-11-27T10:00:00Z");
        let until = Some(at("2026-11-27T10:01:00Z"));
        clocks.record("uid-a", inputs.clone(), rendered, until);
        clocks.record("uid-b", inputs, rendered, until);
        clocks
            .pins
            .deleted(&crate::store::by_handle_uid::handle("uid-a"));
        assert_eq!(clocks.pins.lock().keys().collect::<Vec<_>>(), ["uid-b"]);
    }
}

//! Whether the broker is behind: some controller has objects waiting for a worker in its
//! backlog (`backlog`). The writes people wait for (binds, their resources) go first then, and
//! what no one waits for yields to them: the broker's Events (`events`) wait until no
//! controller is behind, or for a bounded time (docs/design.md, "controller::events").

use std::sync::Arc;

use tokio::sync::watch;

/// Shared by the claim and handle controllers' backlogs, which report to it, and the Event
/// publishers, which wait on it. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Backlogged {
    state: Arc<watch::Sender<State>>,
}

#[derive(Clone, Copy, Default)]
struct State {
    /// How many backlogs have objects waiting.
    behind: usize,
    /// Nothing waits on this any more: the broker is stopping ([`Backlogged::stop_holding`]).
    released: bool,
}

impl Default for Backlogged {
    fn default() -> Self {
        Self {
            state: Arc::new(watch::Sender::new(State::default())),
        }
    }
}

impl Backlogged {
    /// One backlog has objects waiting now (`true`) or none any more (`false`); each backlog
    /// reports only its changes.
    pub(crate) fn report(&self, behind: bool) {
        self.state.send_modify(|state| match behind {
            true => state.behind += 1,
            false => state.behind = state.behind.saturating_sub(1),
        });
    }

    /// Returns once no backlog has objects waiting, at once if none has.
    pub(crate) async fn caught_up(&self) {
        let mut state = self.state.subscribe();
        // The sender lives as long as `self`: the wait never fails.
        let _ = state
            .wait_for(|state| state.released || state.behind == 0)
            .await;
    }

    /// Lets every wait of [`Backlogged::caught_up`] end now and from now on: the controllers
    /// have stopped, and what yielded to them goes out before the process does.
    pub(crate) fn stop_holding(&self) {
        self.state.send_modify(|state| state.released = true);
    }

    /// Whether some backlog has objects waiting now.
    #[cfg(test)]
    pub(crate) fn behind(&self) -> bool {
        self.state.borrow().behind > 0
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Whether `caught_up` returns within a moment (of paused time: nothing else runs).
    async fn caught_up(backlogged: &Backlogged) -> bool {
        tokio::time::timeout(Duration::from_secs(1), backlogged.caught_up())
            .await
            .is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn caught_up_once_every_backlog_that_fell_behind_has_caught_up() {
        let backlogged = Backlogged::default();
        assert!(caught_up(&backlogged).await);
        backlogged.report(true);
        backlogged.report(true);
        assert!(!caught_up(&backlogged).await);
        backlogged.report(false);
        assert!(!caught_up(&backlogged).await, "one backlog is still behind");
        backlogged.report(false);
        assert!(caught_up(&backlogged).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_under_way_ends_when_the_backlog_catches_up() {
        let backlogged = Backlogged::default();
        backlogged.report(true);
        let waiting = tokio::spawn({
            let backlogged = backlogged.clone();
            async move { backlogged.caught_up().await }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!waiting.is_finished());
        backlogged.report(false);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("the wait ends")
            .expect("the wait does not panic");
    }

    #[tokio::test(start_paused = true)]
    async fn once_stopped_nothing_is_held_however_far_behind() {
        let backlogged = Backlogged::default();
        backlogged.report(true);
        backlogged.stop_holding();
        assert!(caught_up(&backlogged).await);
        backlogged.report(true);
        assert!(caught_up(&backlogged).await);
    }
}

//! The shutdown signal: a future every part of the operator can wait on to learn that it
//! should stop. A leaf, so that controllers can stop on it without importing the runtime that
//! raises it.

use std::future::Future;

use futures::future::{self, BoxFuture, Either, FutureExt, Shared};

/// Completes once, when the operator should stop; cheap to clone.
pub(crate) type Shutdown = Shared<BoxFuture<'static, ()>>;

/// The shutdown that `signal` raises, awaited on a task of its own. Every controller polls its
/// shutdown each time the controllers wake; polled there, a signal future asks the runtime's
/// signal registry each time, and a channel only looks at its own state. The task ends with
/// the signal, or once every copy of the shutdown is gone.
pub(crate) fn raised_by(signal: impl Future<Output = ()> + Send + 'static) -> Shutdown {
    let (mut raise, raised) = futures::channel::oneshot::channel::<()>();
    tokio::spawn(async move {
        let signalled = {
            let unheard = raise.cancellation();
            matches!(
                future::select(Box::pin(signal), unheard).await,
                Either::Left(_)
            )
        };
        if signalled {
            let _ = raise.send(());
        }
    });
    // A sender dropped unsent (its task gone with the runtime) is a shutdown too.
    raised.map(|_| ()).boxed().shared()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn the_shutdown_comes_with_its_signal_and_reaches_every_clone() {
        let (signal, signalled) = futures::channel::oneshot::channel::<()>();
        let shutdown = raised_by(signalled.map(|_| ()));
        let waiting = shutdown.clone();
        let early = tokio::time::timeout(Duration::from_millis(50), shutdown.clone()).await;
        assert!(early.is_err(), "no shutdown before the signal");
        signal.send(()).expect("the signal is awaited");
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("a clone taken before the signal completes");
        tokio::time::timeout(Duration::from_secs(5), shutdown)
            .await
            .expect("the shutdown itself completes");
    }

    #[tokio::test]
    async fn the_signal_is_let_go_once_no_copy_of_the_shutdown_is_left() {
        let (mut signal, signalled) = futures::channel::oneshot::channel::<()>();
        let shutdown = raised_by(signalled.map(|_| ()));
        let copy = shutdown.clone();
        drop(shutdown);
        tokio::task::yield_now().await;
        assert!(!signal.is_canceled(), "a copy still waits");
        drop(copy);
        tokio::time::timeout(Duration::from_secs(5), signal.cancellation())
            .await
            .expect("the task waiting for the signal ends, dropping it");
    }
}

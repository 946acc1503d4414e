//! Where the background loops of a replica are started and kept running: each is a task of
//! its own, and one that panics is logged and started again after a pause, never silently
//! gone while its replica keeps the lease (a duty that returns has finished on purpose).
//! The loops themselves ask `leadership` before each round; this module knows nothing of
//! what they do.

use std::future::Future;
use std::time::Duration;

/// The pause before a duty that panicked starts again: short enough that a lease holder's
/// duties barely pause, long enough that a duty panicking at once does not spin.
const RESTART_AFTER: Duration = Duration::from_secs(1);

/// Runs `start()` as a task, and again each time it panics.
pub fn supervise<F, Fut>(name: &'static str, start: F) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            match tokio::spawn(start()).await {
                Ok(()) => return,
                Err(e) if e.is_panic() => {
                    let panic = e.into_panic();
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    tracing::error!(duty = name, panic = %what,
                        "a background duty panicked; it starts again in {RESTART_AFTER:?}");
                    tokio::time::sleep(RESTART_AFTER).await;
                }
                // Cancelled: the runtime is shutting down.
                Err(_) => return,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_duty_that_panics_is_started_again() {
        let starts = Arc::new(AtomicU32::new(0));
        let counted = starts.clone();
        let supervisor = supervise("test", move || {
            let starts = counted.clone();
            async move {
                if starts.fetch_add(1, Ordering::SeqCst) < 2 {
                    panic!("broken round");
                }
            }
        });
        supervisor.await.unwrap();
        assert_eq!(
            starts.load(Ordering::SeqCst),
            3,
            "two panics, then a clean end"
        );
    }
}

//! Which replica runs the duties that must run once at a time (the `duties` module): the holder of
//! the `duties` lease in the database: the lease's timings and what this replica holds. Every
//! replica runs the loop (`duties::lease`); whoever holds the lease renews it, the others try
//! to take it once it has expired. It knows nothing of the duties:
//! the runner waits on [`Leadership::gained`] and [`Leadership::lost`].
//!
//! Lease times are the replicas' wall clocks (keep them within `CLOCK_MARGIN` with NTP): a holder
//! counts itself leader only until `TTL - CLOCK_MARGIN` after it *asked*, so a replica whose
//! clock runs ahead takes over no sooner than the holder has stopped.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::watch;
// Tokio's clock, which tests can pause and advance.
use tokio::time::Instant;

pub(crate) const LEASE: &str = "duties";
/// How long a taken lease lasts without renewal: also how long duties pause when the leader
/// dies without a word (`kill -9`), before another replica takes over.
pub(crate) const TTL: Duration = Duration::from_secs(10);
pub(crate) const RENEW_EVERY: Duration = Duration::from_secs(2);
pub(crate) const CLOCK_MARGIN: Duration = Duration::from_secs(2);
/// A lease nobody looked at for longer than this was left alone: central was down in between,
/// and pollers could not report meanwhile. A shorter gap is told by who looked last: a replica
/// back from a restart that finds itself the last is a central that was down too.
pub(crate) const LAPSE: Duration = Duration::from_secs(5);

/// A replica's view of its own leadership: until when it counts itself the lease holder.
/// Cheap to clone and to ask; a clone can wait for the lease to be gained or lost.
#[derive(Clone)]
pub struct Leadership {
    until: watch::Receiver<Option<Instant>>,
}

impl Leadership {
    pub(crate) fn new() -> (watch::Sender<Option<Instant>>, Leadership) {
        let (tell, until) = watch::channel(None);
        (tell, Leadership { until })
    }

    pub fn is_leader(&self) -> bool {
        self.until
            .borrow()
            .is_some_and(|until| Instant::now() < until)
    }

    /// Returns once this replica holds the lease.
    pub async fn gained(&mut self) {
        while !self.is_leader() {
            if self.until.changed().await.is_err() {
                // The lease loop is gone: nobody will take the lease for this replica.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Returns once this replica no longer counts itself the holder: the lease loop said so,
    /// or the holding ran out without a renewal (a stuck loop or database cannot keep it).
    pub async fn lost(&mut self) {
        loop {
            let until = *self.until.borrow_and_update();
            let Some(until) = until.filter(|until| Instant::now() < *until) else {
                return;
            };
            tokio::select! {
                changed = self.until.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep_until(until).await;
                        return;
                    }
                }
                () = tokio::time::sleep_until(until) => return,
            }
        }
    }
}

/// This replica's name as a lease holder: its host and listening address. Unique among live
/// replicas (two cannot listen on one address of one host), and the same after a restart, so a
/// replica that was killed takes its own lease back at once instead of waiting it out.
pub fn replica_name(listening: SocketAddr) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}/{listening}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_holding_is_lost_when_it_runs_out_unrenewed_and_kept_while_renewed() {
        let (tell, mut leadership) = Leadership::new();
        let waiting = tokio::spawn({
            let mut leadership = leadership.clone();
            async move { leadership.gained().await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished(), "nothing held yet");
        tell.send_replace(Some(Instant::now() + TTL));
        waiting.await.unwrap();

        // Renewed twice, then the loop says nothing more: lost when the last holding ends.
        let started = Instant::now();
        let renewals = tokio::spawn(async move {
            for _ in 0..2 {
                tokio::time::sleep(RENEW_EVERY).await;
                tell.send_replace(Some(Instant::now() + TTL));
            }
            tell
        });
        leadership.lost().await;
        assert_eq!(started.elapsed(), RENEW_EVERY * 2 + TTL);
        assert!(!leadership.is_leader());

        // Told it is not held: lost at once.
        let tell = renewals.await.unwrap();
        tell.send_replace(Some(Instant::now() + TTL));
        leadership.gained().await;
        tell.send_replace(None);
        let started = Instant::now();
        leadership.lost().await;
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}

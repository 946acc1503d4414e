//! The outbox dispatcher, a lease holder's duty (the `duties` module): delivers pending
//! notifications, each channel in order and apart from the others, retrying with exponential
//! backoff and jitter until delivered or a day has passed.
//!
//! Each channel gets a worker task of its own that reads only its channel's queue (its oldest
//! rows, through the `(status, channel_id, created_at, id)` index) until nothing of it is due,
//! then waits for the dispatcher's next round (every 250 ms, and at once when alerting queued
//! something): a dead or slow receiver holds only its own worker, and a round never waits
//! for one. A round woken while a worker drains is kept for it, so a message queued as the
//! worker finished its last read is sent then, not a round later. A round costs one indexed
//! read per channel (channels are few), not per notification or monitor.
//!
//! Only the lease holder sends: the dispatcher and its workers are cancelled with the holder's
//! other duties the moment the lease is lost (the sends of the chunk under way are not
//! recorded then, and the claim keeps the next holder off its rows until it expires). Before
//! sending, a worker claims a chunk of rows in one write (`next_attempt_at` moved past the
//! longest the chunk may take, only for rows still due) and never starts a send that could
//! outlast the claim, so a new leader cannot send what the old one is sending; the chunk's
//! attempts are recorded together after it, and the claims of rows it did not try are given
//! back. Delivery is still at least once: a replica that dies between a receiver's answer and
//! the write that records it leaves the claim to expire, and the next leader sends that
//! message again, with the same `X-Notification-Id` (and body `id`), by which the receiver
//! can drop the copy.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use shared_proto::notifications::{ChannelKind, Notification};
use tokio::task::JoinHandle;

use crate::notify::{retry_delay_ms, Notifier, SEND_TIMEOUT};
use crate::service::channels::tells;
use crate::service::App;
use crate::store::{Attempt, ChannelRead, OutboxRow};

const TICK: Duration = Duration::from_millis(250);
/// Pending notifications a channel's worker reads at a time.
const BATCH: u32 = 100;
/// Notifications claimed, sent and recorded together: two writes for up to this many sends
/// instead of two per send. A lease lost in the middle of a chunk leaves at most this many
/// sent and not recorded, which the next holder sends again, with the same id.
const CHUNK: usize = 20;
/// Delivery attempts stop this long after the notification was made.
const GIVE_UP_AFTER_MS: i64 = 24 * 3600 * 1000;
/// The longest one send may take (`Notifier::deliver` cuts it off at `SEND_TIMEOUT` + 5 s),
/// with time to read its channel and record the chunk.
const SEND_BUDGET_MS: i64 = SEND_TIMEOUT.as_millis() as i64 + 10_000;
/// How long a claimed row is left alone by other replicas: longer than any send can take.
const CLAIM_MS: i64 = 2 * (SEND_TIMEOUT.as_millis() as i64 + 5_000);
/// Notifications of deleted channels are looked for every this many rounds (a minute).
const ORPHAN_SWEEP_ROUNDS: u64 = 240;

pub async fn run(app: Arc<App>, notifier: Notifier) {
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Dropped with this loop (its end, or a panic the supervisor restarts it after): no worker
    // outlives the dispatcher that started it.
    let mut workers: HashMap<String, WorkerHandle> = HashMap::new();
    // When each Alertmanager channel's open problems were last sent again by this replica
    // (stamped by the worker when the re-send went through, so a skipped or failed one is
    // tried again next round); a replica that takes the lease sends them at once.
    let resent: Resent = Arc::default();
    let mut rounds: u64 = 0;
    loop {
        // At the tick, or at once when alerting queued something on this replica.
        tokio::select! {
            _ = ticker.tick() => {}
            () = app.cluster.wakes.delivery.notified() => {}
        }
        // A worker that panicked is started again below.
        workers.retain(|_, worker| !worker.task.0.is_finished());
        if rounds.is_multiple_of(ORPHAN_SWEEP_ROUNDS) {
            // A notification written for a channel deleted at that moment (PostgreSQL: the
            // outbox write and the deletion in concurrent transactions) has no worker to send
            // it and would stay pending for ever; it is given up instead.
            match app.store.fail_orphaned_notifications().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    notifications = n,
                    "gave up notifications of deleted channels"
                ),
                Err(e) => {
                    tracing::warn!("giving up notifications of deleted channels failed: {e:#}")
                }
            }
        }
        rounds += 1;
        let channels = match app.store.recipients().await {
            Ok(channels) => channels,
            Err(e) => {
                tracing::warn!("reading notification channels failed: {e:#}");
                continue;
            }
        };
        lock(&resent).retain(|id, _| channels.iter().any(|c| &c.id == id));
        // A deleted channel's worker stops (dropped, it is aborted).
        workers.retain(|id, _| channels.iter().any(|c| &c.id == id));
        for channel in channels {
            if let Some(worker) = workers.get(&channel.id) {
                // Kept if the worker is busy: it drains again as soon as it is done, so a
                // row queued while it finished its last read is never left for a later round.
                worker.wake.notify_one();
                continue;
            }
            let wake = Arc::new(tokio::sync::Notify::new());
            let worker = Worker {
                app: app.clone(),
                notifier: notifier.clone(),
                channel_id: channel.id.clone(),
                resent: (channel.kind == Some(ChannelKind::Alertmanager)).then(|| resent.clone()),
            };
            let task = AbortOnDrop(tokio::spawn(worker.run(wake.clone())));
            workers.insert(channel.id, WorkerHandle { task, wake });
        }
    }
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A channel's worker, as its dispatcher keeps it: woken each round.
struct WorkerHandle {
    task: AbortOnDrop,
    wake: Arc<tokio::sync::Notify>,
}

/// Delivers one channel's queue, in order, while this replica leads: drains it at once and
/// each time its dispatcher wakes it.
struct Worker {
    app: Arc<App>,
    notifier: Notifier,
    channel_id: String,
    /// For an Alertmanager channel, whose open problems are sent again every resend
    /// interval once its queue is empty: where to read and stamp when they last were.
    resent: Option<Resent>,
}

/// When each Alertmanager channel's open problems were last sent again.
type Resent = Arc<std::sync::Mutex<HashMap<String, Instant>>>;

fn lock(resent: &Resent) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
    resent.lock().unwrap_or_else(|e| e.into_inner())
}

impl Worker {
    async fn run(self, wake: Arc<tokio::sync::Notify>) {
        loop {
            self.drain().await;
            wake.notified().await;
        }
    }

    /// Whether this channel's open problems are due to be sent again.
    fn resend_due(&self) -> bool {
        self.resent.as_ref().is_some_and(|resent| {
            lock(resent)
                .get(&self.channel_id)
                .is_none_or(|at| at.elapsed() >= self.notifier.resend_interval())
        })
    }

    async fn drain(&self) {
        match self.deliver_due().await {
            // Only behind everything queued: a re-send never overtakes a newer message, and
            // one decided after the re-send read its problems is queued, and sent, after it.
            Ok(true) if self.resend_due() => match self.resend_open_problems().await {
                Ok(()) => {
                    if let Some(resent) = &self.resent {
                        lock(resent).insert(self.channel_id.clone(), Instant::now());
                    }
                }
                Err(e) => tracing::warn!(channel_id = %self.channel_id,
                    "sending open problems to Alertmanager again failed: {e:#}"),
            },
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(channel_id = %self.channel_id, "delivering notifications failed: {e:#}")
            }
        }
    }

    /// Sends the channel's due rows oldest first, stopping at the first that is not due or
    /// fails (so a channel's messages never overtake each other), or when the lease is lost.
    /// `true` when nothing of the channel is left pending.
    async fn deliver_due(&self) -> anyhow::Result<bool> {
        loop {
            let rows = self
                .app
                .store
                .pending_notifications(&self.channel_id, BATCH)
                .await?;
            let full = rows.len() == BATCH as usize;
            for chunk in rows.chunks(CHUNK) {
                if !self.deliver_chunk(chunk).await? {
                    return Ok(false);
                }
            }
            if !full {
                return Ok(true);
            }
        }
    }

    /// Claims the due rows at the head of `rows` in one write, sends them in order, and
    /// records their attempts in one more; the claims of rows it did not try are given back.
    /// Stops at a row that is not due, is another replica's, or fails, and before a send
    /// that could outlast the claim. `true` when every row was delivered (or given up).
    async fn deliver_chunk(&self, rows: &[OutboxRow]) -> anyhow::Result<bool> {
        let store = &self.app.store;
        let now = self.app.now_ms();
        let due: Vec<&OutboxRow> = rows
            .iter()
            .take_while(|row| row.next_attempt_at.is_none_or(|at| at <= now))
            .collect();
        if due.is_empty() {
            return Ok(rows.is_empty());
        }
        let until = now + CLAIM_MS;
        let ids: Vec<String> = due.iter().map(|row| row.id.clone()).collect();
        let claimed = store.claim_notifications(&ids, now, until).await?;
        let mut all_done = due.len() == rows.len();
        let mut attempts: Vec<(&str, Sent)> = Vec::with_capacity(due.len());
        let mut failed = None;
        for row in &due {
            // Claimed by another replica (a leader that took over and is sending it), or this
            // claim could end before the send and the chunk's record are done.
            if !claimed.contains(&row.id) || self.app.now_ms() + SEND_BUDGET_MS > until {
                all_done = false;
                break;
            }
            let sent = match self.send(row).await {
                Ok(Some(sent)) => sent,
                // Its channel is gone: nothing sent (the deletion gave its rows up).
                Ok(None) => {
                    all_done = false;
                    break;
                }
                // The store failed (a read under load): what was sent is still recorded and
                // the rest given back below, so one error re-sends nothing and holds no row.
                Err(e) => {
                    failed = Some(e);
                    all_done = false;
                    break;
                }
            };
            let next_may_follow = !matches!(sent, Sent::Retry { .. });
            attempts.push((&row.id, sent));
            if !next_may_follow {
                all_done = false;
                break;
            }
        }
        let recorded: Vec<(&str, Attempt, i64)> = attempts
            .iter()
            .map(|(id, sent)| (*id, sent.attempt(), sent.at()))
            .collect();
        let recording = store.record_attempts(&recorded).await;
        let untried: Vec<String> = ids[attempts.len()..]
            .iter()
            .filter(|id| claimed.contains(*id))
            .cloned()
            .collect();
        if !untried.is_empty() {
            store
                .release_claims(&untried, until, self.app.now_ms())
                .await?;
        }
        recording?;
        match failed {
            Some(e) => Err(e),
            None => Ok(all_done),
        }
    }

    /// Sends the problems this Alertmanager channel was told of, and that are not over, again:
    /// the newest message it took about each, so labels and start times stay what they were.
    /// Costs a look per open problem (`open_problems_told`).
    async fn resend_open_problems(&self) -> anyhow::Result<()> {
        let store = &self.app.store;
        let Some(channel) = store.channel(&self.channel_id).await? else {
            return Ok(());
        };
        let told = store.open_problems_told(&channel.id).await?;
        let recipient = channel.recipient();
        let monitor_ids: Vec<String> = told.iter().filter_map(|t| t.monitor_id.clone()).collect();
        // Still a recipient: a default channel, one the monitor still lists, or one of a tag
        // it still carries.
        let mut recipient_of = HashMap::new();
        for monitor in store.monitors_by_ids(&monitor_ids).await? {
            recipient_of.insert(monitor.id.clone(), tells(&recipient, &monitor));
        }
        let mut newest: HashMap<String, Notification> = HashMap::new();
        for problem in told {
            let recipient = match &problem.monitor_id {
                // A monitor deleted since: only a default channel still hears of it.
                Some(id) => recipient_of.get(id).copied().unwrap_or(recipient.default),
                None => recipient.default,
            };
            let Ok(message) = serde_json::from_str::<Notification>(&problem.payload) else {
                continue;
            };
            if !recipient || !message.event.is_problem() {
                continue;
            }
            let subject = problem.monitor_id.or(problem.poller_id).unwrap_or_default();
            if newest.get(&subject).is_none_or(|m| m.at < message.at) {
                newest.insert(subject, message);
            }
        }
        if newest.is_empty() {
            return Ok(());
        }
        let messages: Vec<Notification> = newest.into_values().collect();
        self.notifier
            .resend_to_alertmanager(&channel.spec, &messages)
            .await
            .map_err(|e| anyhow::anyhow!(e))?;
        tracing::debug!(channel_id = %channel.id, alerts = messages.len(),
            "open problems sent to Alertmanager again");
        Ok(())
    }

    /// Sends one claimed row; what became of it (`None`: its channel is gone, nothing sent).
    async fn send(&self, row: &OutboxRow) -> anyhow::Result<Option<Sent>> {
        // Read afresh for each send: an operator's edit (url, secret, headers) applies to the
        // next message, however long this worker has been draining a backlog.
        let channel = match self.app.store.channel_to_deliver(&self.channel_id).await? {
            ChannelRead::Found(channel) => Ok(*channel),
            // Tried and failed like a receiver that refuses: given up in time, never pending
            // for ever.
            ChannelRead::Unreadable(why) => Err(why),
            // Deleted: its deletion gave up its pending rows.
            ChannelRead::Gone => return Ok(None),
        };
        let outcome = match (serde_json::from_str::<Notification>(&row.payload), &channel) {
            (Ok(message), Ok(channel)) => self.notifier.deliver(&channel.spec, &message).await,
            (Err(e), _) => Err(format!("the stored message is unreadable: {e}")),
            (_, Err(why)) => Err(format!("the stored channel is unreadable: {why}")),
        };
        let now = self.app.now_ms();
        Ok(Some(match outcome {
            Ok(()) => {
                self.app.metrics.notifications_delivered.inc();
                tracing::info!(notification_id = %row.id, channel_id = %row.channel_id,
                    event = %row.event, "notification delivered");
                Sent::Delivered { at: now }
            }
            Err(error) => {
                self.app.metrics.notification_attempts_failed.inc();
                let attempts = row.attempts.clamp(0, 64) as u32;
                let give_up = now - row.created_at > GIVE_UP_AFTER_MS;
                tracing::warn!(notification_id = %row.id, channel_id = %row.channel_id,
                    attempts = attempts + 1, give_up, error = %error, "notification not delivered");
                if give_up {
                    Sent::GiveUp { error, at: now }
                } else {
                    let jitter = rand::thread_rng().gen_range(-0.2..=0.2);
                    let mut delay = retry_delay_ms(attempts, jitter);
                    if channel
                        .as_ref()
                        .is_ok_and(|c| c.spec.kind == ChannelKind::Alertmanager)
                    {
                        // Its open problems are sent again only behind an empty queue: a retry
                        // never waits longer than that, or firing alerts would end meanwhile.
                        let resend = self.notifier.resend_interval().as_millis() as i64;
                        delay = delay.min(resend);
                    }
                    Sent::Retry {
                        error,
                        at: now,
                        retry_at: now + delay,
                    }
                }
            }
        }))
    }
}

/// What became of one send, to be recorded with the others of its chunk.
enum Sent {
    Delivered {
        at: i64,
    },
    Retry {
        error: String,
        at: i64,
        retry_at: i64,
    },
    GiveUp {
        error: String,
        at: i64,
    },
}

impl Sent {
    fn attempt(&self) -> Attempt<'_> {
        match self {
            Sent::Delivered { .. } => Attempt::Delivered,
            Sent::Retry {
                error, retry_at, ..
            } => Attempt::Retry {
                error,
                at: *retry_at,
            },
            Sent::GiveUp { error, .. } => Attempt::GiveUp { error },
        }
    }

    fn at(&self) -> i64 {
        match self {
            Sent::Delivered { at } | Sent::Retry { at, .. } | Sent::GiveUp { at, .. } => *at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_to_a_ceiling() {
        assert_eq!(retry_delay_ms(0, 0.0), 1_000);
        assert_eq!(retry_delay_ms(3, 0.0), 8_000);
        assert_eq!(retry_delay_ms(30, 0.0), 10 * 60 * 1000);
        assert_eq!(retry_delay_ms(0, 0.2), 1_200);
        assert_eq!(retry_delay_ms(0, 5.0), 1_200, "jitter is capped");
    }
}

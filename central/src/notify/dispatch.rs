//! The outbox dispatcher, a once-per-cluster duty (`leadership`): delivers pending
//! notifications, each channel in order and apart from the others (a dead receiver delays only
//! its own channel, and never ingestion), retrying with exponential backoff and jitter until
//! delivered or a day has passed. Delivery is at least once: a notification that reached its
//! receiver just before a crash is sent again, with the same `X-Notification-Id`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use shared_proto::notifications::Notification;

use super::Notifier;
use crate::leadership::Leadership;
use crate::service::{now_ms, App};
use crate::store::{Attempt, ChannelRow, OutboxRow};

const TICK: Duration = Duration::from_millis(250);
/// Pending notifications looked at per round.
const BATCH: u32 = 500;
/// Delivery attempts stop this long after the notification was made.
const GIVE_UP_AFTER_MS: i64 = 24 * 3600 * 1000;
const FIRST_RETRY_MS: i64 = 1_000;
const MAX_RETRY_MS: i64 = 10 * 60 * 1000;

/// The wait before attempt `attempts + 1`: doubling from a second up to ten minutes, ±20 %.
pub fn retry_delay_ms(attempts: u32, jitter: f64) -> i64 {
    let base = FIRST_RETRY_MS
        .saturating_mul(1 << attempts.min(20))
        .min(MAX_RETRY_MS);
    (base as f64 * (1.0 + jitter.clamp(-0.2, 0.2))) as i64
}

pub fn spawn(app: Arc<App>, leadership: Leadership, notifier: Notifier) {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(TICK);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if !leadership.is_leader() {
                continue;
            }
            if let Err(e) = round(&app, &notifier).await {
                tracing::warn!("delivering notifications failed: {e:#}");
            }
        }
    });
}

/// One round: per channel, the oldest pending notifications in order, stopping at the first
/// that is not due or fails (so a channel's messages never overtake each other).
async fn round(app: &Arc<App>, notifier: &Notifier) -> anyhow::Result<()> {
    let pending = app.store.pending_notifications(BATCH).await?;
    if pending.is_empty() {
        return Ok(());
    }
    let channels: HashMap<String, ChannelRow> = app
        .store
        .all_channels()
        .await?
        .into_iter()
        .map(|c| (c.id.clone(), c))
        .collect();
    let mut by_channel: HashMap<String, Vec<OutboxRow>> = HashMap::new();
    for row in pending {
        by_channel
            .entry(row.channel_id.clone())
            .or_default()
            .push(row);
    }
    let mut work = tokio::task::JoinSet::new();
    for (channel_id, rows) in by_channel {
        let (app, notifier) = (app.clone(), notifier.clone());
        let channel = channels.get(&channel_id).cloned();
        work.spawn(async move { deliver_in_order(&app, &notifier, channel, rows).await });
    }
    while let Some(done) = work.join_next().await {
        match done {
            Ok(Err(e)) => tracing::warn!("recording a delivery failed: {e:#}"),
            Err(e) => tracing::warn!("a delivery task failed: {e}"),
            Ok(Ok(())) => {}
        }
    }
    Ok(())
}

async fn deliver_in_order(
    app: &App,
    notifier: &Notifier,
    channel: Option<ChannelRow>,
    rows: Vec<OutboxRow>,
) -> anyhow::Result<()> {
    for row in rows {
        let now = now_ms();
        if row.next_attempt_at.is_some_and(|at| at > now) {
            return Ok(());
        }
        let Some(channel) = &channel else {
            app.store
                .record_attempt(
                    &row.id,
                    Attempt::GiveUp {
                        error: "the channel was deleted",
                    },
                    now,
                )
                .await?;
            continue;
        };
        let outcome = match serde_json::from_str::<Notification>(&row.payload) {
            Ok(message) => notifier.deliver(channel, &message).await,
            Err(e) => Err(format!("the stored message is unreadable: {e}")),
        };
        let now = now_ms();
        match outcome {
            Ok(()) => {
                app.metrics.notifications_delivered.inc();
                tracing::info!(notification_id = %row.id, channel_id = %row.channel_id,
                    event = %row.event, "notification delivered");
                app.store
                    .record_attempt(&row.id, Attempt::Delivered, now)
                    .await?;
            }
            Err(error) => {
                app.metrics.notification_attempts_failed.inc();
                let attempts = row.attempts.clamp(0, 64) as u32;
                let give_up = now - row.created_at > GIVE_UP_AFTER_MS;
                tracing::warn!(notification_id = %row.id, channel_id = %row.channel_id,
                    attempts = attempts + 1, give_up, error = %error, "notification not delivered");
                let attempt = if give_up {
                    Attempt::GiveUp { error: &error }
                } else {
                    let jitter = rand::thread_rng().gen_range(-0.2..=0.2);
                    Attempt::Retry {
                        error: &error,
                        at: now + retry_delay_ms(attempts, jitter),
                    }
                };
                app.store.record_attempt(&row.id, attempt, now).await?;
                return Ok(());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_to_a_ceiling() {
        assert_eq!(retry_delay_ms(0, 0.0), 1_000);
        assert_eq!(retry_delay_ms(3, 0.0), 8_000);
        assert_eq!(retry_delay_ms(30, 0.0), MAX_RETRY_MS);
        assert_eq!(retry_delay_ms(0, 0.2), 1_200);
        assert_eq!(retry_delay_ms(0, 5.0), 1_200, "jitter is capped");
    }
}

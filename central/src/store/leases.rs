//! Leases: which replica holds a once-only duty, until when.

use super::Store;

/// A lease as one replica sees it after trying to take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseState {
    /// Whether the replica that asked holds it now.
    pub held: bool,
    /// Since when replicas have been looking after it without a gap longer than the caller's
    /// `lapse`.
    pub held_since: i64,
}

impl Store {
    /// Takes or renews the lease `name` for `holder` until `until`, if it is free, expired
    /// (before `now`) or already `holder`'s. One conditional upsert, so two replicas racing for
    /// an expired lease cannot both win. Every call marks the lease as seen, and by whom. A new
    /// `held_since` begins when nobody saw it for more than `lapse` ms (no replica was running),
    /// or when `holder` comes back from a restart (`returning`) to find that it was the last to
    /// look: nobody watched while it was down, however short that was.
    pub async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        now: i64,
        until: i64,
        lapse: i64,
        returning: bool,
    ) -> anyhow::Result<LeaseState> {
        // Ahead of the queue: a renewal that waits behind a busy writer's backlog comes after
        // the holding ran out, and the holder stops every duty.
        let _guard = self.write_lock_first().await;
        let mut tx = self.writer.begin().await?;
        // A new lease row is born expired (holder ''), for the update below to take.
        let (held_since,): (i64,) = sqlx::query_as(
            "INSERT INTO leases (name, holder, expires_at, held_since, seen_at, seen_by) \
             VALUES ($1, '', $2 - 1, $2, $2, $4) \
             ON CONFLICT (name) DO UPDATE SET seen_at = $2, seen_by = $4, \
             held_since = CASE WHEN leases.seen_at + $3 < $2 OR ($5 AND leases.seen_by = $4) \
             THEN $2 ELSE leases.held_since END \
             RETURNING held_since",
        )
        .bind(name)
        .bind(now)
        .bind(lapse)
        .bind(holder)
        .bind(returning)
        .fetch_one(&mut *tx)
        .await?;
        let taken = sqlx::query(
            "UPDATE leases SET holder = $2, expires_at = $3 \
             WHERE name = $1 AND (holder = $2 OR expires_at < $4)",
        )
        .bind(name)
        .bind(holder)
        .bind(until)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(LeaseState {
            held: taken.rows_affected() == 1,
            held_since,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::store::testing::{place_among_queued_writes, sqlite_store};

    #[tokio::test]
    async fn a_renewal_waits_for_the_write_under_way_and_one_more_not_the_queue() {
        let (store, _dir) = sqlite_store().await;
        let renewal = |store: Arc<crate::store::Store>| async move {
            let _write = store.write_lock_first().await;
        };
        let at = place_among_queued_writes(Arc::new(store), renewal).await;
        assert!(at <= 1, "the renewal came after {at} queued writes");
    }

    #[tokio::test]
    async fn one_holder_at_a_time_until_the_lease_expires() {
        let (store, _dir) = sqlite_store().await;
        let take = |holder: &'static str, now: i64| {
            let store = &store;
            async move {
                let state = store
                    .acquire_lease("duties", holder, now, now + 100, 100, false)
                    .await
                    .unwrap();
                (state.held, state.held_since)
            }
        };
        assert_eq!(take("a", 0).await, (true, 0));
        assert_eq!(
            take("b", 50).await,
            (false, 0),
            "b waits while a's lease runs"
        );
        assert_eq!(take("a", 60).await, (true, 0), "a renews");
        assert_eq!(take("b", 150).await, (false, 0));
        assert_eq!(
            take("b", 161).await,
            (true, 0),
            "expired: b takes over at once, and the holding goes on"
        );
        assert_eq!(
            take("a", 170).await,
            (false, 0),
            "a late renewal does not take it back"
        );
        // Nobody looks for longer than the lapse (every replica was down): a new holding.
        assert_eq!(take("a", 400).await, (true, 400));
        assert_eq!(take("a", 450).await, (true, 400));
    }

    #[tokio::test]
    async fn a_replica_back_from_a_restart_it_alone_saw_begins_a_new_holding() {
        let (store, _dir) = sqlite_store().await;
        let take = |holder: &'static str, now: i64, returning: bool| {
            let store = &store;
            async move {
                store
                    .acquire_lease("duties", holder, now, now + 1000, 100, returning)
                    .await
                    .unwrap()
                    .held_since
            }
        };
        assert_eq!(take("a", 0, true).await, 0);
        assert_eq!(take("a", 50, false).await, 0);
        // Killed after that and back within the lapse: a was the last to look, so nobody
        // watched in between.
        assert_eq!(take("a", 120, true).await, 120);
        assert_eq!(take("a", 170, false).await, 120, "renewals go on");
        // With b around meanwhile, a's return breaks nothing.
        assert_eq!(take("b", 200, false).await, 120);
        assert_eq!(take("a", 250, true).await, 120);
    }
}

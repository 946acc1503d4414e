//! Leases: which replica holds a once-only duty, until when.

use super::Store;

impl Store {
    /// Takes or renews the lease `name` for `holder` until `until`, if it is free, expired
    /// (before `now`) or already `holder`'s; `true` if `holder` holds it now. One conditional
    /// upsert, so two replicas racing for an expired lease cannot both win.
    pub async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        now: i64,
        until: i64,
    ) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let done = sqlx::query(
            "INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, \
             expires_at = excluded.expires_at \
             WHERE leases.holder = excluded.holder OR leases.expires_at < $4",
        )
        .bind(name)
        .bind(holder)
        .bind(until)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::testing::sqlite_store;

    #[tokio::test]
    async fn one_holder_at_a_time_until_the_lease_expires() {
        let (store, _dir) = sqlite_store().await;
        assert!(store.acquire_lease("duties", "a", 0, 100).await.unwrap());
        assert!(
            !store.acquire_lease("duties", "b", 50, 150).await.unwrap(),
            "b must wait while a's lease runs"
        );
        assert!(
            store.acquire_lease("duties", "a", 60, 160).await.unwrap(),
            "a renews"
        );
        assert!(!store.acquire_lease("duties", "b", 150, 250).await.unwrap());
        assert!(
            store.acquire_lease("duties", "b", 161, 261).await.unwrap(),
            "expired: b takes over"
        );
        assert!(
            !store.acquire_lease("duties", "a", 170, 270).await.unwrap(),
            "a late renewal does not take it back"
        );
    }
}

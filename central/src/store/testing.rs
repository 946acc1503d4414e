//! Helpers for the store's unit tests and the service's (test builds only): a SQLite store in a
//! temporary directory, rows and results to write, and a way to place a
//! write among queued ones. Must not be reached from code that ships.

use std::future::Future;
use std::sync::{Arc, Mutex};

use super::Store;
use crate::domain::Poller;

/// A runtime for a property test's async cases (`proptest!` bodies are not async).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Lets every task spawned on this (current-thread) runtime run until it waits.
async fn settle() {
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
}

/// Where `write` lands among ten ordinary writes queued behind one under way: how many of
/// them got the write lock before it was done (`write` is started once they all wait).
pub async fn place_among_queued_writes<F, Fut>(store: Arc<Store>, write: F) -> usize
where
    F: FnOnce(Arc<Store>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    const MARK: usize = usize::MAX;
    let order: Arc<Mutex<Vec<usize>>> = Arc::default();
    let under_way = store.write_lock().await;
    let mut writers = Vec::new();
    for i in 0..10 {
        let (store, order) = (store.clone(), order.clone());
        writers.push(tokio::spawn(async move {
            let _write = store.write_lock().await;
            order.lock().unwrap().push(i);
            settle().await;
        }));
    }
    settle().await;
    let first = {
        let (store, order) = (store.clone(), order.clone());
        tokio::spawn(async move {
            write(store).await;
            order.lock().unwrap().push(MARK);
        })
    };
    settle().await;
    drop(under_way);
    first.await.unwrap();
    for writer in writers {
        writer.await.unwrap();
    }
    let order = order.lock().unwrap();
    assert_eq!(order.len(), 11, "{order:?}");
    order.iter().position(|&i| i == MARK).unwrap()
}

/// An enabled poller of no region, created at `created_at`, last heard from at `now`.
pub fn poller_row(created_at: i64, now: i64) -> Poller {
    Poller {
        id: uuid::Uuid::new_v4().to_string(),
        name: "p".into(),
        alias: None,
        region: None,
        datacenter: None,
        capabilities: vec!["http".into()],
        capability_limit: None,
        version: Some("test".into()),
        enabled: true,
        registration_token_id: None,
        created_at,
        last_heartbeat_at: Some(now),
        last_upload_at: None,
        queue_depth: 0,
        oldest_queued_at: None,
        dropped_results: 0,
        held_results: 0,
        assignment_version: None,
        deleted_at: None,
        scheduler_health: None,
        online_since: Some(created_at),
        status: None,
        status_since: None,
        last_error: None,
        last_error_at: None,
    }
}
/// A result of monitor `m1`, checked from one place at `ts`, 5 ms.
pub fn result(id: &str, ts: i64, status: &str) -> super::NewResult {
    super::NewResult {
        id: id.into(),
        monitor_id: "m1".into(),
        region: None,
        ts,
        status: shared_proto::poller_api::ResultStatus::parse(status).unwrap(),
        latency_ms: Some(5),
        msg: String::new(),
        meta: "{}".into(),
        next_due_at: None,
        dependencies: None,
    }
}

/// A store on a fresh SQLite file that lives as long as the returned directory.
pub async fn sqlite_store() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("central.db").display());
    (Store::connect(&url).await.unwrap(), dir)
}

/// Runs `sql` on the store's writing connection: a hand edit of the database, for tests of
/// what central does with a value it never writes.
pub async fn hand_edit(store: &Store, sql: &str) {
    sqlx::query(sql).execute(&store.writer).await.unwrap();
}

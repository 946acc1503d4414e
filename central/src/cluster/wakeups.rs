//! Wake-ups: of this replica's background work by what it writes itself (`Wakes`), and across
//! replicas (`duties::wakeups` hands the database's announcements to them): a long poll waiting on one replica wakes when another replica changes
//! its poller's assignments, alerting on the lease holder when another replica marks monitors
//! due (results it stored), placement there when one queues pollers, and commands' doorbells
//! (`bells`) when one issues or stores the answer to a command. On PostgreSQL every
//! replica listens for what the database announces and hands it to the in-process
//! notifications; on SQLite there is one process, and those are all there is. It wakes; it
//! never decides what a poller gets (that is `service::assignments`).

/// Wake-ups of background work by what this replica writes, so that it runs on a change
/// rather than at its next tick (each loop keeps its tick for what other replicas write). A
/// wake given while nobody waits is kept for the next wait, never lost.
#[derive(Default)]
pub struct Wakes {
    /// Monitors were marked due (`store::due`): results, edits, moves.
    pub alerting: tokio::sync::Notify,
    /// Notifications were queued in the outbox.
    pub delivery: tokio::sync::Notify,
    /// Pollers were queued for placement (`store::placement_due`).
    pub placement: tokio::sync::Notify,
}

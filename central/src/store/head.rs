//! The results head on SQLite (docs/results-head.md): per monitor, the rowids of the results
//! stored since they were last flushed into `result_index`, held in memory so that storing a
//! result costs no page of a per-monitor index. Owns the rowids and what a flush takes from
//! them; must not touch the database: the store appends after its commits (`results`),
//! flushes in chunks (`head_flush`) and reads through `Head::rowids_of` (`by_monitor`).
//!
//! The order that keeps a read whole: a reader takes the head's rowids first and opens its
//! snapshot of `result_index` after; a flush drops rowids only after the chunk holding them has
//! committed. A rowid dropped before the reader looked was committed to the index before its
//! snapshot began; one still there when it looked is read from `results` by rowid (and, if its
//! chunk committed meanwhile, from the index too: readers' `UNION` drops the duplicate).
//!
//! Cost: appending is proportional to the results stored, a read to the monitor's rowids in
//! the head, a flush to the rowids it takes (grouped per monitor, sorted by monitor once).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::Notify;

/// Past this many rowids the flush duty is woken at once, whatever its period: what bounds the
/// head's memory (8 bytes a result, plus a list per monitor) at any rate of results.
pub const FLUSH_AT: usize = 1_000_000;

#[derive(Debug, Default)]
pub struct Head {
    inner: Mutex<Inner>,
    /// Woken when the head holds `FLUSH_AT` rowids.
    full: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    /// Per monitor, its rowids in the order stored (ascending: rowids only grow, `results`).
    monitors: HashMap<String, Vec<i64>>,
    entries: usize,
    /// The greatest rowid ever appended (or found at start): the next insert's rowids follow
    /// it, so they are never reused even after the newest rows were deleted.
    newest: i64,
}

/// What a flush takes: monitors in id order, each with its rowids up to the cut.
pub type Taken = Vec<(String, Vec<i64>)>;

impl Head {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The rowids stay consistent whatever panicked while holding the lock: every change
        // is a push, a drain or a removal on one monitor's list, with the count beside it.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A head that continues after `newest` (the greatest rowid stored or cut), holding
    /// `stored` (rowid order).
    pub fn starting_after(newest: i64, stored: impl IntoIterator<Item = (String, i64)>) -> Head {
        let head = Head::default();
        head.inner().newest = newest;
        head.append(stored);
        head
    }

    /// Adds what a committed transaction stored, in rowid order.
    pub fn append(&self, stored: impl IntoIterator<Item = (String, i64)>) {
        let mut inner = self.inner();
        for (monitor_id, rowid) in stored {
            inner.monitors.entry(monitor_id).or_default().push(rowid);
            inner.entries += 1;
            inner.newest = inner.newest.max(rowid);
        }
        if inner.entries >= FLUSH_AT {
            self.full.notify_one();
        }
    }

    /// The greatest rowid appended: new rows take rowids after it, and a flush cuts at it.
    pub fn newest(&self) -> i64 {
        self.inner().newest
    }

    /// How many rowids the head holds.
    pub fn len(&self) -> usize {
        self.inner().entries
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves once the head holds `FLUSH_AT` rowids (or at once if it did when last
    /// appended to and nobody has waited since).
    pub async fn filled(&self) {
        self.full.notified().await
    }

    /// A monitor's rowids not yet flushed.
    pub fn rowids_of(&self, monitor_id: &str) -> Vec<i64> {
        self.inner()
            .monitors
            .get(monitor_id)
            .cloned()
            .unwrap_or_default()
    }

    /// What a flush up to `cut` (a rowid) writes: per monitor, in monitor order.
    pub fn to_flush(&self, cut: i64) -> Taken {
        let inner = self.inner();
        let mut taken: Taken = inner
            .monitors
            .iter()
            .map(|(monitor_id, rowids)| {
                let upto = rowids.partition_point(|r| *r <= cut);
                (monitor_id.clone(), rowids[..upto].to_vec())
            })
            .filter(|(_, rowids)| !rowids.is_empty())
            .collect();
        taken.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        taken
    }

    /// After a chunk of a flush up to `cut` committed: these monitors' rowids up to `cut`
    /// are in `result_index`, and readers from now on find them there.
    pub fn flushed<'a>(&self, monitors: impl IntoIterator<Item = &'a str>, cut: i64) {
        let mut inner = self.inner();
        for monitor_id in monitors {
            let Some(rowids) = inner.monitors.get_mut(monitor_id) else {
                continue;
            };
            // Ascending: the flushed ones are a prefix.
            let flushed = rowids.partition_point(|r| *r <= cut);
            rowids.drain(..flushed);
            let emptied = rowids.is_empty();
            inner.entries -= flushed;
            if emptied {
                inner.monitors.remove(monitor_id);
            }
        }
    }

    /// Forgets a deleted monitor's rowids (after the deletion committed).
    pub fn forget(&self, monitor_id: &str) {
        let mut inner = self.inner();
        if let Some(rowids) = inner.monitors.remove(monitor_id) {
            inner.entries -= rowids.len();
        }
    }
}

/// Splits what a flush takes into transactions of about `size` rowids, never between two
/// rowids of one monitor: `Head::flushed` drops a monitor's rowids up to the cut at once, so
/// they must all have committed by then.
pub fn chunks(taken: Taken, size: usize) -> Vec<Taken> {
    let mut chunks: Vec<Taken> = Vec::new();
    let mut current: Taken = Vec::new();
    let mut held = 0;
    for monitor in taken {
        if held >= size.max(1) {
            chunks.push(std::mem::take(&mut current));
            held = 0;
        }
        held += monitor.1.len();
        current.push(monitor);
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet, VecDeque};

    use proptest::prelude::*;

    use super::*;

    /// What a test does to the head and its database, one step at a time.
    #[derive(Debug, Clone)]
    enum Step {
        /// A committed upload: one result for each of these monitors (indexes into a few).
        Upload(Vec<u8>),
        /// The next chunk of the flush under way, or a new flush's first.
        FlushChunk,
        /// A reader takes the head's rowids of a monitor...
        ReadBegin(u8),
        /// ...and then reads `result_index` in a snapshot opened now.
        ReadEnd,
        /// Central stops at once and starts again: the head is rebuilt from the store.
        Crash,
        /// Retention: a monitor's results up to this rowid go (rows and index entries).
        Expire(u8, i64),
        /// A monitor is deleted: its rows, its index entries and its head entries.
        Delete(u8),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => proptest::collection::vec(0u8..6, 1..5).prop_map(Step::Upload),
            2 => Just(Step::FlushChunk),
            2 => (0u8..6).prop_map(Step::ReadBegin),
            2 => Just(Step::ReadEnd),
            1 => Just(Step::Crash),
            1 => (0u8..6, 0i64..60).prop_map(|(m, r)| Step::Expire(m, r)),
            1 => (0u8..6).prop_map(Step::Delete),
        ]
    }

    /// The store as the head sees it: every stored result by rowid (the truth),
    /// `result_index`'s rowids as each commit left them (so a snapshot is a version), and the
    /// stored cut.
    #[derive(Default)]
    struct Db {
        results: BTreeMap<i64, u8>,
        index_versions: Vec<BTreeSet<(u8, i64)>>,
        cut: i64,
    }

    impl Db {
        fn index(&self) -> BTreeSet<(u8, i64)> {
            self.index_versions.last().cloned().unwrap_or_default()
        }

        fn truth(&self, monitor: u8) -> BTreeSet<i64> {
            self.results
                .iter()
                .filter(|(_, m)| **m == monitor)
                .map(|(r, _)| *r)
                .collect()
        }

        /// What start-up rebuilds: the rows after the cut.
        fn head(&self, names: &[String]) -> Head {
            let newest = self
                .results
                .keys()
                .last()
                .copied()
                .unwrap_or(0)
                .max(self.cut);
            Head::starting_after(
                newest,
                self.results
                    .range(self.cut + 1..)
                    .map(|(r, m)| (names[*m as usize].clone(), *r)),
            )
        }
    }

    struct Reading {
        monitor: u8,
        taken: Vec<i64>,
        stored_before: BTreeSet<i64>,
    }

    struct Flush {
        cut: i64,
        chunks: VecDeque<Taken>,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Whatever the interleaving of uploads, flush chunks, reads, crashes, retention and
        /// deletions, a read finds every result of its monitor committed before it began and
        /// still stored, and nothing that was never stored; rowids are never reused; after a
        /// whole flush the index alone is every stored result.
        #[test]
        fn reads_through_the_head_and_the_index_are_whole(steps in proptest::collection::vec(step(), 1..80)) {
            let names: Vec<String> = (0..6).map(|m| format!("m{m}")).collect();
            let by_name = |name: &str| names.iter().position(|n| n == name).unwrap() as u8;
            let mut db = Db::default();
            let mut head = Head::default();
            let mut flush: Option<Flush> = None;
            let mut read: Option<Reading> = None;
            let mut ever: BTreeSet<i64> = BTreeSet::new();
            for step in steps {
                match step {
                    Step::Upload(which) => {
                        // Rowids after the head's newest, as ingest assigns them.
                        let mut rowid = head.newest();
                        let mut stored = Vec::new();
                        for m in which {
                            rowid += 1;
                            // A deleted row's rowid may come back after a restart
                            // (harmless: nothing refers to it by rowid then); never a stored
                            // row's, nor one at or below the cut.
                            prop_assert!(!db.results.contains_key(&rowid) && rowid > db.cut, "rowid {rowid} reused");
                            stored.push((m, rowid));
                        }
                        db.results.extend(stored.iter().map(|(m, r)| (*r, *m)));
                        ever.extend(stored.iter().map(|(_, r)| *r));
                        head.append(stored.into_iter().map(|(m, r)| (names[m as usize].clone(), r)));
                    }
                    Step::FlushChunk => {
                        let under_way = flush.get_or_insert_with(|| {
                            let cut = head.newest();
                            Flush { cut, chunks: chunks(head.to_flush(cut), 2).into() }
                        });
                        let cut = under_way.cut;
                        let chunk = under_way.chunks.pop_front();
                        let last = under_way.chunks.is_empty();
                        let mut index = db.index();
                        if let Some(chunk) = &chunk {
                            // Inserted from `results`: what was deleted meanwhile stays out.
                            for (monitor, rowids) in chunk {
                                let m = by_name(monitor);
                                index.extend(rowids.iter().filter(|r| db.results.contains_key(r)).map(|r| (m, *r)));
                            }
                        }
                        if last {
                            db.cut = cut;
                            flush = None;
                        }
                        db.index_versions.push(index);
                        if let Some(chunk) = &chunk {
                            head.flushed(chunk.iter().map(|(m, _)| m.as_str()), cut);
                        }
                    }
                    Step::ReadBegin(m) => {
                        read = Some(Reading {
                            monitor: m,
                            taken: head.rowids_of(&names[m as usize]),
                            stored_before: db.truth(m),
                        });
                    }
                    Step::ReadEnd => {
                        if let Some(Reading { monitor, taken, stored_before }) = read.take() {
                            // Rows are read by rowid from `results` as they are now.
                            let mut found: BTreeSet<i64> = taken.into_iter().filter(|r| db.results.contains_key(r)).collect();
                            found.extend(db.index().iter().filter(|(m, r)| *m == monitor && db.results.contains_key(r)).map(|(_, r)| *r));
                            let now = db.truth(monitor);
                            let expected: BTreeSet<i64> = stored_before.intersection(&now).copied().collect();
                            prop_assert!(expected.is_subset(&found), "missing {:?}", expected.difference(&found).collect::<Vec<_>>());
                            prop_assert!(found.is_subset(&now), "read results not stored");
                        }
                    }
                    Step::Crash => {
                        flush = None;
                        read = None;
                        head = db.head(&names);
                    }
                    Step::Expire(m, upto) => {
                        db.results.retain(|r, mm| !(*mm == m && *r <= upto));
                        let mut index = db.index();
                        index.retain(|(mm, r)| !(*mm == m && *r <= upto));
                        db.index_versions.push(index);
                    }
                    Step::Delete(m) => {
                        db.results.retain(|_, mm| *mm != m);
                        let mut index = db.index();
                        index.retain(|(mm, _)| *mm != m);
                        db.index_versions.push(index);
                        head.forget(&names[m as usize]);
                    }
                }
                prop_assert!(head.len() <= ever.len());
            }
            // After a whole flush, the index alone is every stored result.
            let cut = head.newest();
            for chunk in chunks(head.to_flush(cut), 2) {
                let mut index = db.index();
                for (monitor, rowids) in &chunk {
                    let m = by_name(monitor);
                    index.extend(rowids.iter().filter(|r| db.results.contains_key(r)).map(|r| (m, *r)));
                }
                db.index_versions.push(index);
                head.flushed(chunk.iter().map(|(m, _)| m.as_str()), cut);
            }
            let index: BTreeSet<i64> = db.index().iter().map(|(_, r)| *r).collect();
            let all: BTreeSet<i64> = db.results.keys().copied().collect();
            prop_assert_eq!(index, all);
            prop_assert!(head.is_empty());
        }
    }

    #[test]
    fn chunks_never_split_a_monitor() {
        let taken: Taken = vec![
            ("a".into(), vec![1, 2, 3]),
            ("b".into(), vec![4]),
            ("c".into(), vec![5]),
        ];
        let split = chunks(taken, 2);
        assert_eq!(split.len(), 2);
        assert_eq!(split[0], vec![("a".to_string(), vec![1, 2, 3])]);
        assert_eq!(split[1].len(), 2);
    }
}

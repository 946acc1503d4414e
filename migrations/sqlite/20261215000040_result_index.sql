-- The per-monitor index of results, written in bulk (docs/results-head.md): the results stored
-- since the last flush are indexed in central's memory (`store::head`) and flushed here in
-- (monitor_id, ts, id) order, so that storing a result writes no page of a per-monitor index.
-- It names results by id: rowids are what the head holds, and `settings.result_index_cut` is
-- the greatest rowid flushed. SQLite only: PostgreSQL keeps `results_monitor_ts`.
CREATE TABLE result_index (
    monitor_id TEXT NOT NULL,
    ts         BIGINT NOT NULL,
    id         TEXT NOT NULL,
    PRIMARY KEY (monitor_id, ts, id)
) WITHOUT ROWID;

-- Every stored result is flushed (read in index order, so written in key order).
INSERT INTO result_index (monitor_id, ts, id)
SELECT monitor_id, ts, id FROM results ORDER BY monitor_id, ts, id;

INSERT INTO settings (key, value)
SELECT 'result_index_cut', CAST(COALESCE(MAX(rowid), 0) AS TEXT) FROM results;

DROP INDEX results_monitor_ts;

-- Day buckets folded from closed hours (store::rollup_folding, docs/rollup-folding.md). Ingest
-- adds results to their hour only, an hour row starting with `folded` 0; the fold adds a closed
-- hour row to its day and sets `folded` to 1, and a result for an hour already folded adds to
-- the day itself. Every row before this migration was added to its day at ingest: folded.
-- Day and (old) minute rows are always 1.
ALTER TABLE rollups ADD COLUMN folded INTEGER NOT NULL DEFAULT 1;

-- The hour rows not yet in their day: the fold's work and what day reads add. Small: about the
-- rows of the hour under way and the one closing.
CREATE INDEX rollups_unfolded ON rollups (monitor_id, region, bucket_start) WHERE folded = 0;

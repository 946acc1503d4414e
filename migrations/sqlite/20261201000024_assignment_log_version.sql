-- Which pollers a run of versions concerned (`pollers_changed_between`: a replica hearing of
-- another's version reads only that version's entries).
CREATE INDEX assignment_log_version ON assignment_log (version);

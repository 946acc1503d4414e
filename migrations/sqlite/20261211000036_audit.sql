-- The audit log (issue 25): one row per change made through the settings API or the page.
-- Append-only: no statement may change a row, and rows go only once older than the retention
-- (`service::audit`; the prune deletes by `at`).
CREATE TABLE audit_log (
    id          TEXT PRIMARY KEY,
    at          BIGINT NOT NULL,
    actor_kind  TEXT NOT NULL,
    actor_id    TEXT,
    actor_name  TEXT NOT NULL,
    address     TEXT,
    action      TEXT NOT NULL,
    object_kind TEXT NOT NULL,
    object_id   TEXT,
    before      TEXT,
    after       TEXT
);
CREATE INDEX audit_log_at ON audit_log (at, id);
CREATE INDEX audit_log_actor ON audit_log (actor_id, at);
CREATE INDEX audit_log_object ON audit_log (object_kind, object_id, at);
CREATE TRIGGER audit_log_append_only BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;

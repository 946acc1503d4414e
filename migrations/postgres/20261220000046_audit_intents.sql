-- Changes about to be made (issue 67): the audit entry of a change is written here before the
-- change runs, and moved to `audit_log` in one transaction once it succeeded (or deleted when
-- it was refused). A change whose intent cannot be written is not made; one whose entry could
-- not be moved (central stopped or the log failed in between) is finished by upkeep from what
-- the object then is (`service::audit`). Same columns as `audit_log`, without `after`.
CREATE TABLE audit_intents (
    id            TEXT PRIMARY KEY,
    at            BIGINT NOT NULL,
    actor_kind    TEXT NOT NULL,
    actor_id      TEXT,
    actor_user_id TEXT,
    actor_name    TEXT NOT NULL,
    address       TEXT,
    action        TEXT NOT NULL,
    object_kind   TEXT NOT NULL,
    object_id     TEXT,
    before        TEXT
);
CREATE INDEX audit_intents_at ON audit_intents (at);

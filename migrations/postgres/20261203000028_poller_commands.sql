-- Operators' commands to pollers (`store::commands`): check now, reset, test. Each rides on
-- its poller's assignments long poll until the agent acknowledges it, once, or it expires.
-- `spec`: the monitor to run (a `test`, which has no monitors row). `result`: the result
-- the agent sent back, as JSON. The hourly upkeep deletes rows expired over an hour ago.
CREATE TABLE poller_commands (
    id         TEXT PRIMARY KEY,
    poller_id  TEXT NOT NULL,
    kind       TEXT NOT NULL,
    monitor_id TEXT,
    spec       TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    sent_at    BIGINT,
    acked_at   BIGINT,
    done       BIGINT,
    message    TEXT,
    result     TEXT
);
-- A long poll reads its poller's open commands.
CREATE INDEX poller_commands_open ON poller_commands (poller_id, acked_at);
CREATE INDEX poller_commands_expiry ON poller_commands (expires_at);

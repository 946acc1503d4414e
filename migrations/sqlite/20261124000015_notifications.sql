-- Notifications: the channels operators configure, the alerting state of each monitor (what
-- its status was and what was last notified, so a restart never notifies twice), and the
-- outbox, which is also the delivery log: one row per notification and channel, written in the
-- same transaction as the state change that caused it.
ALTER TABLE monitors ADD COLUMN notification_channel_ids TEXT;

CREATE TABLE notification_channels (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    url        TEXT,
    secret     TEXT,
    headers    TEXT NOT NULL,
    is_default BIGINT NOT NULL DEFAULT 0,
    email_from TEXT,
    email_to   TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE alert_state (
    monitor_id      TEXT PRIMARY KEY,
    status          TEXT NOT NULL,
    since           BIGINT NOT NULL,
    notified_status TEXT,
    notified_at     BIGINT,
    -- times of recent status changes (JSON array), for flap damping
    changes         TEXT NOT NULL
);

CREATE TABLE notifications (
    id              TEXT PRIMARY KEY,
    channel_id      TEXT NOT NULL,
    event           TEXT NOT NULL,
    monitor_id      TEXT,
    poller_id       TEXT,
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        BIGINT NOT NULL DEFAULT 0,
    last_error      TEXT,
    created_at      BIGINT NOT NULL,
    next_attempt_at BIGINT,
    delivered_at    BIGINT
);
CREATE INDEX notifications_pending ON notifications (status, channel_id, created_at);
CREATE INDEX notifications_created ON notifications (created_at, id);
CREATE INDEX notifications_monitor ON notifications (monitor_id, created_at);

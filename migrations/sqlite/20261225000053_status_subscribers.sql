-- Subscribers of status pages and the notices they are sent (service::status_pages::
-- subscribers, duties::page_notices). A subscriber is one address (a mail address, lowercased,
-- or a webhook URL) of one page: `pending` until confirmed, `confirmed`, or `turned_off` (a
-- webhook that failed too often). A notice is written once, in the transaction of what it
-- tells (an incident's change), with one delivery per subscriber it goes to; deliveries are
-- the outbox the duty sends from, oldest due first. Deleting a page deletes all three
-- (store::status_pages, in one transaction; no foreign keys are relied on).
CREATE TABLE status_subscribers (
    id               TEXT PRIMARY KEY,
    page_id          TEXT NOT NULL,
    kind             TEXT NOT NULL,
    address          TEXT NOT NULL,
    secret           TEXT,
    status           TEXT NOT NULL,
    failures         BIGINT NOT NULL DEFAULT 0,
    last_error       TEXT,
    confirm_sent_at  BIGINT,
    created_at       BIGINT NOT NULL,
    confirmed_at     BIGINT,
    UNIQUE (page_id, address)
);
-- The confirmations sent to one address lately, across pages (the per-address limit).
CREATE INDEX status_subscribers_by_address ON status_subscribers (address, confirm_sent_at);
CREATE TABLE status_notices (
    id         TEXT PRIMARY KEY,
    page_id    TEXT NOT NULL,
    event      TEXT NOT NULL,
    content    TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX status_notices_by_page ON status_notices (page_id, created_at);
CREATE TABLE status_notice_deliveries (
    id              TEXT PRIMARY KEY,
    notice_id       TEXT NOT NULL,
    subscriber_id   TEXT NOT NULL,
    page_id         TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    last_error      TEXT,
    created_at      BIGINT NOT NULL,
    sent_at         BIGINT
);
-- What is due: the duty's one read per round.
CREATE INDEX status_notice_deliveries_due ON status_notice_deliveries (status, next_attempt_at);
CREATE INDEX status_notice_deliveries_by_subscriber
    ON status_notice_deliveries (subscriber_id, status);
-- Where planned maintenance has been told up to, per page (maintenance.started / .ended).
ALTER TABLE status_pages ADD COLUMN maintenance_told_until BIGINT;

-- Incidents on status pages (service::status_pages::incidents): a title, where it stands, the
-- monitors it affects (JSON ids), and its timeline of updates (its first message the oldest).
-- Deleting a page deletes its incidents, and an incident its updates (store::status_incidents
-- does both in one transaction; no foreign keys are relied on).
CREATE TABLE status_incidents (
    id          TEXT PRIMARY KEY,
    page_id     TEXT NOT NULL,
    title       TEXT NOT NULL,
    status      TEXT NOT NULL,
    monitor_ids TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    resolved_at BIGINT
);
CREATE INDEX status_incidents_by_page ON status_incidents (page_id, created_at, id);
-- The open ones and those resolved lately, which the page shows, without reading the rest.
CREATE INDEX status_incidents_by_resolution ON status_incidents (page_id, resolved_at);
CREATE TABLE status_incident_updates (
    id          TEXT PRIMARY KEY,
    incident_id TEXT NOT NULL,
    status      TEXT NOT NULL,
    message     TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX status_incident_updates_by_incident
    ON status_incident_updates (incident_id, created_at, id);

-- Incidents a page opens itself (service::status_pages::auto): the page's choice (`off`,
-- `draft`, `publish`); whether visitors see an incident yet (0 for a draft); and the monitor
-- whose going down opened it, whose recovery resolves it. Adds only: what an older central
-- wrote reads as published incidents of pages that open none themselves.
ALTER TABLE status_pages ADD COLUMN auto_incidents TEXT NOT NULL DEFAULT 'off';
ALTER TABLE status_incidents ADD COLUMN published BIGINT NOT NULL DEFAULT 1;
ALTER TABLE status_incidents ADD COLUMN opened_for TEXT;
CREATE INDEX status_incidents_by_opener ON status_incidents (opened_for, page_id);

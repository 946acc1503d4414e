-- A status page's logo (service::status_pages): the `data:` URL it was given in (a PNG, JPEG,
-- WebP or SVG image of at most 64 KiB), served at /status/{slug}/logo. Adds only.
ALTER TABLE status_pages ADD COLUMN logo TEXT;

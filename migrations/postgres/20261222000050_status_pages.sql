-- Status pages: what visitors see of chosen monitors (service::status_pages). Sections are
-- the operator's JSON (ids, tags, display names), read whole with the page; the password is
-- an argon2 hash, never shown.
CREATE TABLE status_pages (
    id            TEXT PRIMARY KEY,
    slug          TEXT NOT NULL UNIQUE,
    title         TEXT NOT NULL,
    description   TEXT,
    sections      TEXT NOT NULL,
    visibility    TEXT NOT NULL,
    password_hash TEXT,
    domain        TEXT UNIQUE,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);

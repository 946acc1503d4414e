-- What central checks each linked user with at the identity provider (issue 67): the refresh
-- token their last sign-in got, and when they were last found still there. A round reads only
-- the rows due (`checked_at`, indexed), so its cost follows the linked users due, not all.
CREATE TABLE sso_links (
    user_id       TEXT PRIMARY KEY,
    refresh_token TEXT NOT NULL,
    checked_at    BIGINT NOT NULL
);
CREATE INDEX sso_links_checked_at ON sso_links (checked_at);

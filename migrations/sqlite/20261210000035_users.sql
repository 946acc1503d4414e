-- Users and their API keys (issue 25). A user logs in with a password (argon2id PHC string)
-- and/or single sign-on (`oidc_subject`, the issuer's `sub`); `role` is viewer, editor or
-- admin (`service::access`). Emails are stored lowercased, unique.
CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    email         TEXT NOT NULL,
    role          TEXT NOT NULL,
    password_hash TEXT,
    oidc_subject  TEXT,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE UNIQUE INDEX users_email ON users (email);
CREATE UNIQUE INDEX users_oidc_subject ON users (oidc_subject);

-- An API key acts with `role`, never above its maker's (`user_id`; NULL: made with the admin
-- token). Only the SHA-256 of its secret is kept: the secret is 256 random bits, so a slow hash
-- would add nothing but cost to every call.
CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    user_id       TEXT,
    name          TEXT NOT NULL,
    role          TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT,
    last_used_at  BIGINT,
    revoked_at    BIGINT
);
CREATE INDEX api_keys_user ON api_keys (user_id);

-- Whose a web session is: NULL for one opened with the admin token.
ALTER TABLE web_sessions ADD COLUMN user_id TEXT;
CREATE INDEX web_sessions_user ON web_sessions (user_id);

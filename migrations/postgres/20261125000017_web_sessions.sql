-- Sessions of the operators' web page: the SHA-256 of the session cookie (never the cookie
-- itself), the CSRF token its forms carry, and when it ends.
CREATE TABLE web_sessions (
    id_sha256  TEXT PRIMARY KEY,
    csrf_token TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX web_sessions_expiry ON web_sessions (expires_at);

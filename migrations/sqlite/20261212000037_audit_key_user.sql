-- The user an API key acted for, beside the key (issue 25): an entry made with a key still
-- names its user after the key, or the user, is removed; filtering by a user finds their
-- keys' changes too.
ALTER TABLE audit_log ADD COLUMN actor_user_id TEXT;
CREATE INDEX audit_log_actor_user ON audit_log (actor_user_id, at);

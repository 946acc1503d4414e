-- Rotation with an overlap: the secret before the newest one stays valid until
-- `previous_valid_until`, so a fleet's deploy config can be updated without a window in which
-- new agents cannot register.
ALTER TABLE registration_tokens ADD COLUMN previous_secret_hash TEXT;
ALTER TABLE registration_tokens ADD COLUMN previous_valid_until BIGINT;

-- Keys a user made (for themselves or for others), found by maker when the user is removed,
-- demoted or leaves at the identity provider (issue 67): all of them are revoked.
CREATE INDEX api_keys_made_by ON api_keys (made_by);

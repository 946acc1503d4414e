-- Who made each API key (issue 25): `admin_token`, or the id of the user who made it (which
-- may differ from `user_id`, the user it acts for). Rotating the admin token revokes every
-- key made with it, those made for users included. Keys of no user were all made with it.
ALTER TABLE api_keys ADD COLUMN made_by TEXT;
UPDATE api_keys SET made_by = 'admin_token' WHERE user_id IS NULL;

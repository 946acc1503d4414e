-- A registration token's capabilities are a limit: the most a poller enrolled with it may
-- advertise (a comma list; NULL: any). The poller keeps its own copy, so that the limit holds
-- on every heartbeat even after the token is revoked or rotated.
ALTER TABLE registration_tokens ADD COLUMN capabilities TEXT;
ALTER TABLE pollers ADD COLUMN capability_limit TEXT;

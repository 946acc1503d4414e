-- When each poller last came online: monitors move back to a returning poller only after it
-- has stayed online for the settle time, so a flapping poller does not drag them around.
ALTER TABLE pollers ADD COLUMN online_since BIGINT;

-- Why a refresh token was revoked. `superseded`: it was the unused successor of a token presented
-- again within the retry grace, so whoever presents it later held the lost answer of the first
-- refresh, and with it half of a replay (RFC 9700 §4.14.2): presenting it revokes the family.
ALTER TABLE refresh_tokens ADD COLUMN revoked_reason TEXT;

-- The addresses each API key was used from (issue 67): a key's first call from an address not
-- in here is recorded in the audit log (`use_from_new_address`), so that a key used from
-- somewhere new shows. One row per key and address; deleted with the key.
CREATE TABLE api_key_addresses (
    key_id   TEXT NOT NULL,
    address  TEXT NOT NULL,
    first_at BIGINT NOT NULL,
    PRIMARY KEY (key_id, address)
);

-- Refresh rotation remembers each token's successor, so that a retry after a lost answer
-- (the same spent token, moments later, its successor never used) is not taken for theft.
ALTER TABLE refresh_tokens ADD COLUMN replaced_by TEXT;

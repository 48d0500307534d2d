-- The term of the leader (package leader) whose fenced transaction wrote
-- the row: the store's write path sets simlock.term for each transaction
-- of a fenced store, so a row says which leader committed it. Rows written
-- before this migration, and by a store that is not fenced, carry 0.
ALTER TABLE events ADD COLUMN term bigint NOT NULL DEFAULT 0;
ALTER TABLE events ALTER COLUMN term SET DEFAULT COALESCE(NULLIF(current_setting('simlock.term', true), '')::bigint, 0);
ALTER TABLE gateway_grants ADD COLUMN term bigint NOT NULL DEFAULT 0;
ALTER TABLE gateway_grants ALTER COLUMN term SET DEFAULT COALESCE(NULLIF(current_setting('simlock.term', true), '')::bigint, 0);

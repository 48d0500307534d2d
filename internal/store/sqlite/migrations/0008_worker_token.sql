-- The join token a worker first joined with: its id is then that token's,
-- and an uplink naming it with another token is refused until the worker is
-- removed. '' for a worker recorded before this column.
ALTER TABLE workers ADD COLUMN token_id TEXT NOT NULL DEFAULT '';

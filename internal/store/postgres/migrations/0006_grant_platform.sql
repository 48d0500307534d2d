-- A grant record's platform, as in the SQLite backend's migration 0019: a
-- gateway that starts again counts the end of a lease granted before it by
-- the lease's platform. Records written before this column are ''.
ALTER TABLE gateway_grants ADD COLUMN platform text NOT NULL DEFAULT '';

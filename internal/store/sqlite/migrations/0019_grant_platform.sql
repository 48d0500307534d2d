-- A grant record's platform: a gateway that starts again counts the end
-- of a lease granted before it (simlock_lease_ends_total) by the lease's
-- platform. Records written before this column are '' (counted as other).
ALTER TABLE gateway_grants ADD COLUMN platform TEXT NOT NULL DEFAULT '';

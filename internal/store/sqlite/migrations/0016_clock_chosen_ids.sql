-- The clock reading the stored times are in step with: the wall clock
-- with real time since boot (wallclock.Reading), written by the decision
-- that starts the engine and by the one that moves the stored times after
-- the wall clock jumped, in the same transaction, and kept fresh between.
-- A start compares the clock with it to see a jump while the daemon was
-- down. One row.
CREATE TABLE clock (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    wall_ms INTEGER NOT NULL,
    boot_ns INTEGER NOT NULL,
    boot_id TEXT    NOT NULL
);

-- A lease's chosen id (lease.request's leaseId) is unique only among its
-- owner's leases: id is the lease's unique key from now on, chosen_id the
-- id its owner chose ('' for none). A lease made before, whose chosen id
-- is its key, keeps it as both.
ALTER TABLE leases ADD COLUMN chosen_id TEXT NOT NULL DEFAULT '';
UPDATE leases SET chosen_id = id WHERE id_chosen = 1;

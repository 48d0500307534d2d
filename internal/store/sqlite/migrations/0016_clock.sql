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

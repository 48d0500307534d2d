-- Usage rollups: what the event log's lease events add to the usage
-- figures, folded (internal/usage) in the transaction that appends them,
-- so a usage query reads a window's rows, never its events.
--
-- A cell is one minute of one source's events for one platform: worker is
-- '' for the daemon's own events and the worker's id for those a gateway
-- relayed; platform is '' when the fold could not tell it. records are the
-- cell's encoded deltas, appended to as events commit.
CREATE TABLE usage_minutes (
    minute   INTEGER NOT NULL,
    worker   TEXT    NOT NULL,
    platform TEXT    NOT NULL,
    records  BLOB    NOT NULL,
    PRIMARY KEY (minute, worker, platform)
) WITHOUT ROWID;

-- The minutes of a closed hour, gathered by the pruning pass into one row
-- per source and platform (chunks: each minute's offset and records), so a
-- 30-day query reads hundreds of rows, not tens of thousands.
CREATE TABLE usage_hours (
    hour     INTEGER NOT NULL,
    worker   TEXT    NOT NULL,
    platform TEXT    NOT NULL,
    chunks   BLOB    NOT NULL,
    PRIMARY KEY (hour, worker, platform)
) WITHOUT ROWID;

-- The requests (kind 'request', from lease.requested) and leases ('lease',
-- from lease.granted) whose end is still to come, so the event that ends
-- one measures its durations without reading the log. A row goes when its
-- end is folded, or when pruning takes the events of its time (at).
CREATE TABLE usage_open (
    worker     TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    requested  INTEGER NOT NULL DEFAULT 0,
    platform   TEXT    NOT NULL,
    dispatched INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (worker, kind, id)
) WITHOUT ROWID;

-- The events already in the log are folded by the store when it opens the
-- database, in Go, by the same fold as a commit (it cannot be written in
-- SQL): from seq folded_seq + 1 to last_seq, the row deleted when done.
CREATE TABLE usage_backfill (
    folded_seq INTEGER NOT NULL,
    last_seq   INTEGER NOT NULL
);
INSERT INTO usage_backfill (folded_seq, last_seq)
    SELECT min(seq) - 1, max(seq) FROM events HAVING count(*) > 0;

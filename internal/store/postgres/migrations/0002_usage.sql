-- Usage rollups (the SQLite schema's migrations 14 and 15 for them): what
-- the event log's lease events add to the usage figures, folded by package
-- usage in the transaction that appends them, so a usage query reads a
-- window's rows, never its events. Minutes and hours are epoch ms.
--
-- A cell is one minute of one source's events for one platform: worker is
-- '' for the gateway's own events and the worker's id for those it counts
-- for a worker; platform is '' when the fold could not tell it. records
-- are the cell's encoded deltas, appended to as events commit.
CREATE TABLE usage_minutes (
    minute   bigint NOT NULL,
    worker   text   NOT NULL,
    platform text   NOT NULL,
    records  bytea  NOT NULL,
    PRIMARY KEY (minute, worker, platform)
);

-- The minutes of a closed hour, gathered by the pruning pass into one row
-- per source and platform (chunks: each minute's offset and records).
CREATE TABLE usage_hours (
    hour     bigint NOT NULL,
    worker   text   NOT NULL,
    platform text   NOT NULL,
    chunks   bytea  NOT NULL,
    PRIMARY KEY (hour, worker, platform)
);

-- The requests (kind 'request') and leases ('lease') whose end is still
-- to come, so the event that ends one measures its durations without
-- reading the log; dispatched_to is the worker a gateway's request was
-- handed to ('' until then).
CREATE TABLE usage_open (
    worker        text    NOT NULL,
    kind          text    NOT NULL,
    id            text    NOT NULL,
    at            bigint  NOT NULL,
    requested     bigint  NOT NULL DEFAULT 0,
    platform      text    NOT NULL,
    dispatched    boolean NOT NULL DEFAULT false,
    dispatched_to text    NOT NULL DEFAULT '',
    PRIMARY KEY (worker, kind, id)
);

-- The events already in the log when the rollups were added are folded by
-- the store when it opens the database, in Go, by the same fold as a
-- commit: from seq folded_seq + 1 to last_seq, the row deleted when done.
CREATE TABLE usage_backfill (
    folded_seq bigint NOT NULL,
    last_seq   bigint NOT NULL
);
INSERT INTO usage_backfill (folded_seq, last_seq)
    SELECT min(seq) - 1, max(seq) FROM events HAVING count(*) > 0;

-- Jobs: the record of each component install, on this worker or across the
-- fleet from a gateway. The record is the job's state as JSON (its rows
-- change together); the columns beside it are what lists and the retention
-- sweep read.
CREATE TABLE jobs (
    id         TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    ended_at   INTEGER NOT NULL DEFAULT 0,
    state      TEXT NOT NULL,
    record     TEXT NOT NULL
) STRICT;

CREATE INDEX jobs_created ON jobs (created_at);

-- Every event insert wrote a page of the unique index on events.id, and
-- ids are random, so the three events of a grant wrote three pages of it:
-- a quarter of a grant's commit. Nothing reads an event by id (readers page
-- by seq), and the one writer that relied on the constraint, a gateway
-- relaying a worker's batch again after a reconnect, now skips what it
-- already relayed by the worker's seq. SQLite cannot drop a column
-- constraint, so the table is rebuilt, keeping every seq and the
-- AUTOINCREMENT high-water mark (a pruned log must never hand a seq out
-- twice).
CREATE TABLE events_new (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    id        TEXT    NOT NULL,
    timestamp INTEGER NOT NULL,
    event     TEXT    NOT NULL,
    payload   TEXT
);
INSERT INTO events_new (seq, id, timestamp, event, payload)
    SELECT seq, id, timestamp, event, payload FROM events ORDER BY seq;
CREATE TABLE events_high_water AS
    SELECT coalesce(max(seq), 0) AS seq FROM sqlite_sequence WHERE name = 'events';
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
DELETE FROM sqlite_sequence WHERE name IN ('events', 'events_new');
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'events', max(coalesce((SELECT max(seq) FROM events), 0), (SELECT seq FROM events_high_water));
DROP TABLE events_high_water;
CREATE INDEX events_timestamp ON events (timestamp);

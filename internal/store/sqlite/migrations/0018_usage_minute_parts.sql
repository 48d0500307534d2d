-- A minute's cell was one row, appended to by every commit that folded
-- events into it: SQLite rewrites a row whole, so each append rewrote the
-- minute's records so far, onto overflow pages once past about a kilobyte,
-- and a busy minute's commits grew with it. A cell is now rows of bounded
-- size, told apart by part (the seq of the first event of the commit that
-- started the row; 0 for the rows migrated here), so a commit appends its
-- few bytes to a row that stays small. A cell's records are its rows',
-- in any order: they are deltas, summed.
CREATE TABLE usage_minutes_parts (
    minute   INTEGER NOT NULL,
    worker   TEXT    NOT NULL,
    platform TEXT    NOT NULL,
    part     INTEGER NOT NULL,
    records  BLOB    NOT NULL,
    PRIMARY KEY (minute, worker, platform, part)
) WITHOUT ROWID;
INSERT INTO usage_minutes_parts (minute, worker, platform, part, records)
    SELECT minute, worker, platform, 0, records FROM usage_minutes;
DROP TABLE usage_minutes;
ALTER TABLE usage_minutes_parts RENAME TO usage_minutes;

-- A minute's cell was one row, appended to by every commit that folded
-- events into it: PostgreSQL writes a new version of the whole row on
-- each update (toasted past about 2 KiB), so a busy minute's commits grew
-- with what it had gathered. A cell is now rows of bounded size, told
-- apart by part (the seq of the first event of the commit that started
-- the row; 0 for the rows there were). A cell's records are its rows', in
-- any order: they are deltas, summed. (The SQLite schema's migration 18.)
ALTER TABLE usage_minutes ADD COLUMN part bigint NOT NULL DEFAULT 0;
ALTER TABLE usage_minutes DROP CONSTRAINT usage_minutes_pkey;
ALTER TABLE usage_minutes ADD PRIMARY KEY (minute, worker, platform, part);

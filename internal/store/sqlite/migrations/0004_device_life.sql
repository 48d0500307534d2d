-- A device's life beyond its state: the deferred-reclaim marker (the next
-- clean must be a full wipe, even after a crash), and its quarantine retry
-- count and next retry time (epoch ms, 0 = none), so retries resume after a
-- restart.
ALTER TABLE devices ADD COLUMN deferred_reclaim INTEGER NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN quarantine_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN quarantine_next_retry INTEGER NOT NULL DEFAULT 0;

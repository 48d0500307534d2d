-- A gateway's workers: the ones it knows (a disconnected one stays listed
-- until removed or past gateway.disconnectedRetentionMs), which are drained
-- (kept until undrain or remove, across restarts of either side), and how
-- far each one's events were relayed into this log (the worker's own seq).
CREATE TABLE workers (
  id TEXT PRIMARY KEY,
  label TEXT NOT NULL,
  drained INTEGER NOT NULL DEFAULT 0,
  last_seq INTEGER NOT NULL DEFAULT 0,
  last_seen_at INTEGER NOT NULL DEFAULT 0
);

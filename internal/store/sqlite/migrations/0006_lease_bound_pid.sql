-- The local process a lease is bound to (lease.bind): its pid and the time
-- it started (epoch ms), which together name one process even after the pid
-- is reused. 0 = not bound.
ALTER TABLE leases ADD COLUMN bound_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN bound_pid_started_at INTEGER NOT NULL DEFAULT 0;

-- 1 when the lease's id was chosen by its requester (lease.request's
-- leaseId) rather than made by the daemon.
ALTER TABLE leases ADD COLUMN id_chosen INTEGER NOT NULL DEFAULT 0;

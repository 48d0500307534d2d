-- Every index is one more page a commit writes. These served only reads
-- that run at startup or every few minutes (Load, pruning) over tables that
-- pruning keeps small, or no read at all, while every grant, settlement and
-- lease end paid for them:
--   leases_device_id: no query looks leases up by device;
--   leases_active: Load reads the active leases once, at startup;
--   lease_requests_created_at: Load reads the open requests once, at startup;
--   lease_requests_settled_at: pruning, every ten minutes, over at most
--     lease.maxRequestRecords rows.
-- leases_ended_at stays: pruning leases scans a table that keeps a week of
-- ended leases, and only a lease's end writes that index.
DROP INDEX leases_device_id;
DROP INDEX leases_active;
DROP INDEX lease_requests_created_at;
DROP INDEX lease_requests_settled_at;

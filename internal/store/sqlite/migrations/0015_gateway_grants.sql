-- A gateway's grant records: each lease it granted through one of its
-- workers, written in the commit that grants the request, deleted when the
-- gateway learns the lease ended. The gateway's lease index is rebuilt from
-- these rows at start; a worker's report can only confirm or end a row of
-- its own, never add one. key is the gateway's unique name for the lease,
-- <worker_id>.<worker_lease_id>; requester_id is the fleet requester
-- (without the gw: prefix a worker sees) and chosen_id the lease id the
-- requester chose ('' for none), unique only within owner_id.
CREATE TABLE gateway_grants (
    key             TEXT    NOT NULL PRIMARY KEY,
    worker_id       TEXT    NOT NULL,
    worker_lease_id TEXT    NOT NULL,
    device_id       TEXT    NOT NULL,
    owner_id        TEXT    NOT NULL,
    requester_id    TEXT    NOT NULL,
    chosen_id       TEXT    NOT NULL DEFAULT '',
    request_id      TEXT    NOT NULL,
    granted_at      INTEGER NOT NULL
) WITHOUT ROWID;

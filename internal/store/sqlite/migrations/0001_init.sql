-- 0001: the initial schema. Times are INTEGER epoch milliseconds; 0 means
-- "not yet" (never used, not settled, not ended) so columns stay NOT NULL and
-- comparisons never meet NULL.

CREATE TABLE devices (
    id               TEXT    PRIMARY KEY,
    platform         TEXT    NOT NULL,
    model            TEXT    NOT NULL,
    os_version       TEXT    NOT NULL,
    driver           TEXT    NOT NULL,
    driver_device_id TEXT    NOT NULL,
    address          TEXT    NOT NULL DEFAULT '',
    -- Opaque to the store: whatever the driver needs to find its device again
    -- after a restart. NULL when the driver keeps nothing.
    driver_data      TEXT,
    state            TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    state_since      INTEGER NOT NULL,
    last_used_at     INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX devices_created_at ON devices (created_at);

CREATE TABLE leases (
    id              TEXT    PRIMARY KEY,
    -- Device rows are never deleted (a gone device is state 'deleted'), so a
    -- lease naming an unknown device can only be a bug; refuse it.
    device_id       TEXT    NOT NULL REFERENCES devices (id),
    -- Not a foreign key: requests and leases are pruned on separate schedules.
    request_id      TEXT    NOT NULL DEFAULT '',
    requester_id    TEXT    NOT NULL,
    owner_id        TEXT    NOT NULL,
    granted_at      INTEGER NOT NULL,
    ttl_ms          INTEGER NOT NULL,
    last_renewed_at INTEGER NOT NULL,
    ttl_deadline    INTEGER NOT NULL,
    ended_at        INTEGER NOT NULL DEFAULT 0,
    end_reason      TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX leases_device_id ON leases (device_id);
-- Startup loads only the active leases; keep that scan off the history.
CREATE INDEX leases_active ON leases (granted_at) WHERE ended_at = 0;
CREATE INDEX leases_ended_at ON leases (ended_at) WHERE ended_at <> 0;

CREATE TABLE lease_requests (
    id              TEXT    PRIMARY KEY,
    requester_id    TEXT    NOT NULL,
    -- NULL, not '', when the request carries no key, so that keyless requests
    -- stay out of the unique index below.
    idempotency_key TEXT,
    state           TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    settled_at      INTEGER NOT NULL DEFAULT 0,
    -- The whole contract.LeaseRequestRecord as JSON; the columns above are
    -- copies kept only to be indexed and filtered on.
    record          TEXT    NOT NULL
);

CREATE UNIQUE INDEX lease_requests_idempotency
    ON lease_requests (requester_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX lease_requests_created_at ON lease_requests (created_at);
CREATE INDEX lease_requests_settled_at ON lease_requests (settled_at);

CREATE TABLE events (
    -- AUTOINCREMENT so a seq is never handed out twice, even after pruning
    -- has emptied the table: subscribers resume from the last seq they saw.
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    id        TEXT    NOT NULL UNIQUE,
    timestamp INTEGER NOT NULL,
    event     TEXT    NOT NULL,
    payload   TEXT
);

CREATE INDEX events_timestamp ON events (timestamp);

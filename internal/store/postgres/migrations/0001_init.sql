-- The gateway's tables in PostgreSQL's dialect: the schema the SQLite
-- backend reaches after its migrations, for the records a gateway keeps.
-- Times are epoch milliseconds (bigint); JSON documents are text, stored
-- byte for byte as given (jsonb would reformat them).

CREATE TABLE devices (
    id                    text    PRIMARY KEY,
    platform              text    NOT NULL,
    model                 text    NOT NULL,
    os_version            text    NOT NULL,
    driver                text    NOT NULL,
    driver_device_id      text    NOT NULL,
    address               text    NOT NULL DEFAULT '',
    driver_data           text,
    state                 text    NOT NULL,
    created_at            bigint  NOT NULL,
    state_since           bigint  NOT NULL,
    last_used_at          bigint  NOT NULL DEFAULT 0,
    deferred_reclaim      boolean NOT NULL DEFAULT false,
    quarantine_attempts   bigint  NOT NULL DEFAULT 0,
    quarantine_next_retry bigint  NOT NULL DEFAULT 0,
    image_tag             text    NOT NULL DEFAULT '',
    mode                  text    NOT NULL DEFAULT '',
    slimmed               boolean NOT NULL DEFAULT false
);
CREATE INDEX devices_created_at ON devices (created_at);

CREATE TABLE leases (
    -- The lease's unique key (LeaseRecord.UniqueKey).
    id                   text    PRIMARY KEY,
    device_id            text    NOT NULL REFERENCES devices (id),
    request_id           text    NOT NULL DEFAULT '',
    requester_id         text    NOT NULL,
    owner_id             text    NOT NULL,
    granted_at           bigint  NOT NULL,
    ttl_ms               bigint  NOT NULL,
    last_renewed_at      bigint  NOT NULL,
    ttl_deadline         bigint  NOT NULL,
    ended_at             bigint  NOT NULL DEFAULT 0,
    end_reason           text    NOT NULL DEFAULT '',
    bound_pid            bigint  NOT NULL DEFAULT 0,
    bound_pid_started_at bigint  NOT NULL DEFAULT 0,
    id_chosen            boolean NOT NULL DEFAULT false,
    chosen_id            text    NOT NULL DEFAULT ''
);
CREATE INDEX leases_ended_at ON leases (ended_at) WHERE ended_at <> 0;

CREATE TABLE lease_requests (
    id              text   PRIMARY KEY,
    -- Arrival order, kept when the row is updated: ties of created_at are
    -- broken by it, as SQLite's rowid breaks them.
    ord             bigserial,
    requester_id    text   NOT NULL,
    idempotency_key text,
    state           text   NOT NULL,
    created_at      bigint NOT NULL,
    settled_at      bigint NOT NULL DEFAULT 0,
    record          text   NOT NULL
);
CREATE UNIQUE INDEX lease_requests_idempotency
    ON lease_requests (requester_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE events (
    seq       bigint PRIMARY KEY,
    id        text   NOT NULL,
    timestamp bigint NOT NULL,
    event     text   NOT NULL,
    payload   text
);
CREATE INDEX events_timestamp ON events (timestamp);

-- The last seq handed out: moved in the transaction that appends, so a
-- seq is never reused, even after pruning, and a failed commit takes none.
CREATE TABLE event_seq (
    id   integer PRIMARY KEY CHECK (id = 1),
    last bigint  NOT NULL
);
INSERT INTO event_seq (id, last) VALUES (1, 0);

CREATE TABLE tokens (
    id         text   PRIMARY KEY,
    role       text   NOT NULL,
    label      text   NOT NULL DEFAULT '',
    hash       text   NOT NULL UNIQUE,
    created_at bigint NOT NULL
);

CREATE TABLE workers (
    id           text    PRIMARY KEY,
    label        text    NOT NULL,
    drained      boolean NOT NULL DEFAULT false,
    last_seq     bigint  NOT NULL DEFAULT 0,
    last_seen_at bigint  NOT NULL DEFAULT 0,
    token_id     text    NOT NULL DEFAULT ''
);

CREATE TABLE jobs (
    id         text   PRIMARY KEY,
    created_at bigint NOT NULL,
    ended_at   bigint NOT NULL DEFAULT 0,
    state      text   NOT NULL,
    record     text   NOT NULL
);
CREATE INDEX jobs_created ON jobs (created_at);

CREATE TABLE gateway_grants (
    key             text   PRIMARY KEY,
    worker_id       text   NOT NULL,
    worker_lease_id text   NOT NULL,
    device_id       text   NOT NULL,
    owner_id        text   NOT NULL,
    requester_id    text   NOT NULL,
    chosen_id       text   NOT NULL DEFAULT '',
    request_id      text   NOT NULL,
    granted_at      bigint NOT NULL
);

CREATE TABLE clock (
    id      integer PRIMARY KEY CHECK (id = 1),
    wall_ms bigint  NOT NULL,
    boot_ns bigint  NOT NULL,
    boot_id text    NOT NULL
);

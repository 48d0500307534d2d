-- A gateway's fleet identity: the id its workers know it by (its
-- requesters on a worker are gw:<id>:…), fixed by the first gateway that
-- used the store. One row.
CREATE TABLE fleet_identity (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    id  TEXT    NOT NULL
);

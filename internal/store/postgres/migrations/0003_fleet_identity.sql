-- The fleet's identity: the id its workers know it by (its requesters on a
-- worker are gw:<id>:…), fixed by the first gateway that used the database
-- and the same whichever replica leads. One row.
CREATE TABLE fleet_identity (
    one integer PRIMARY KEY CHECK (one = 1),
    id  text    NOT NULL
);

-- HTTP bearer tokens. Only the SHA-256 of a secret is kept; the secret is
-- shown once, when the token is made.
CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    role       TEXT NOT NULL,
    label      TEXT NOT NULL DEFAULT '',
    hash       TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
) STRICT;

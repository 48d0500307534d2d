-- Components (runtimes, system images) simlock installed. A record is the
-- proof of ownership: simlock removes only a component whose current
-- receipt matches its record.
CREATE TABLE components (
    platform     TEXT NOT NULL,
    version      TEXT NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    receipt      TEXT NOT NULL,
    installed_at INTEGER NOT NULL,
    PRIMARY KEY (platform, version)
) STRICT;

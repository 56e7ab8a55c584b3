-- The records of infra's fleets: the ledger, the observation cache and the lock holders.

CREATE TABLE infra_ledger_rows (
    fleet      TEXT    NOT NULL,
    provider   TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    region     TEXT    NOT NULL,
    discovered BOOLEAN NOT NULL DEFAULT FALSE,
    intent     BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (fleet, provider, kind, name, region)
);

CREATE TABLE infra_cache_entries (
    fleet    TEXT    NOT NULL,
    provider TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    position INTEGER NOT NULL,
    name     TEXT    NOT NULL,
    region   TEXT    NOT NULL,
    handle   TEXT    NOT NULL,
    observed JSONB   NOT NULL,
    written  JSONB   NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(written) = 'object'),
    PRIMARY KEY (fleet, provider, kind, position)
);

CREATE TABLE infra_lock_holders (
    fleet       TEXT    PRIMARY KEY,
    id          TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    pid         BIGINT  NOT NULL,
    verb        TEXT    NOT NULL,
    since       BIGINT  NOT NULL,
    backend_pid INTEGER NOT NULL
);

-- Every table's own identifier is NOT NULL, as on PostgreSQL. SQLite lets a column
-- declared `TEXT PRIMARY KEY` hold NULL (unlike `INTEGER PRIMARY KEY` and unlike
-- PostgreSQL), so the six tables keyed that way are rebuilt with `NOT NULL` on the
-- key, keeping every row, column, constraint and index. The store never wrote a NULL
-- identifier; this makes the schema say so. The migration runs with foreign-key
-- enforcement off (SQLite's procedure for rebuilding a table others refer to) and
-- every reference is checked before it commits.

CREATE TABLE principals_rebuilt (
    id          TEXT    NOT NULL PRIMARY KEY,
    kind        TEXT    NOT NULL CHECK (kind IN ('human', 'token')),
    responsible TEXT,
    revoked     BOOLEAN NOT NULL DEFAULT FALSE
);
INSERT INTO principals_rebuilt (id, kind, responsible, revoked)
    SELECT id, kind, responsible, revoked FROM principals;
DROP TABLE principals;
ALTER TABLE principals_rebuilt RENAME TO principals;

CREATE TABLE machines_rebuilt (
    id                  TEXT    NOT NULL PRIMARY KEY,
    identity_kind       TEXT    NOT NULL CHECK (identity_kind IN ('smbios_uuid', 'node_id')),
    identity_value      TEXT    NOT NULL,
    cluster_id          TEXT    NOT NULL,
    endpoint            TEXT    NOT NULL,
    rollout_scope       TEXT    NOT NULL,
    talos_minor         TEXT    NOT NULL,
    -- The per-machine revision counter (§4.1), advanced under this row's lock.
    revision            INTEGER  NOT NULL DEFAULT 0,
    assignment_revision INTEGER  NOT NULL DEFAULT 1,
    desired_release     TEXT,
    applied_release     TEXT,
    applied_digest      TEXT,
    applied_source      TEXT,
    baseline_revision   INTEGER  NOT NULL DEFAULT 0,
    frozen              BOOLEAN NOT NULL DEFAULT FALSE,
    released_epoch      BLOB,
    open_drift          INTEGER,
    open_drift_digest   TEXT
);
INSERT INTO machines_rebuilt (id, identity_kind, identity_value, cluster_id, endpoint, rollout_scope, talos_minor, revision, assignment_revision, desired_release, applied_release, applied_digest, applied_source, baseline_revision, frozen, released_epoch, open_drift, open_drift_digest)
    SELECT id, identity_kind, identity_value, cluster_id, endpoint, rollout_scope, talos_minor, revision, assignment_revision, desired_release, applied_release, applied_digest, applied_source, baseline_revision, frozen, released_epoch, open_drift, open_drift_digest FROM machines;
DROP TABLE machines;
ALTER TABLE machines_rebuilt RENAME TO machines;

CREATE TABLE releases_rebuilt (
    id           TEXT   NOT NULL PRIMARY KEY,
    published_by TEXT   NOT NULL,
    published_at INTEGER NOT NULL
);
INSERT INTO releases_rebuilt (id, published_by, published_at)
    SELECT id, published_by, published_at FROM releases;
DROP TABLE releases;
ALTER TABLE releases_rebuilt RENAME TO releases;

CREATE TABLE plans_rebuilt (
    id                       TEXT    NOT NULL PRIMARY KEY,
    machine_id               TEXT    NOT NULL REFERENCES machines (id),
    release_id               TEXT    NOT NULL REFERENCES releases (id),
    artifact_digest          TEXT    NOT NULL,
    key_provider             TEXT    NOT NULL,
    key_id                   TEXT    NOT NULL,
    key_version              INTEGER  NOT NULL,
    identity_kind            TEXT    NOT NULL,
    identity_value           TEXT    NOT NULL,
    cluster_id               TEXT    NOT NULL,
    assignment_revision      INTEGER  NOT NULL,
    desired_release          TEXT    NOT NULL,
    baseline_revision        INTEGER  NOT NULL,
    pre_dispatch_digest      TEXT    NOT NULL,
    bound_drift              INTEGER,
    operation_kind           TEXT    NOT NULL DEFAULT 'apply_config',
    mode                     TEXT    NOT NULL DEFAULT 'no_reboot',
    route                    TEXT    NOT NULL,
    talos_minor              TEXT    NOT NULL,
    max_evidence_age_ms      INTEGER  NOT NULL,
    transport_deadline_ms    INTEGER  NOT NULL,
    verification_deadline_ms INTEGER  NOT NULL CHECK (transport_deadline_ms <= verification_deadline_ms),
    max_attempts             INTEGER  NOT NULL CHECK (max_attempts >= 1),
    rollout_scope            TEXT    NOT NULL,
    rollout_limit            INTEGER  NOT NULL DEFAULT 1 CHECK (rollout_limit = 1),
    expires_at_ms            INTEGER  NOT NULL,
    creator_id               TEXT    NOT NULL,
    creator_role             TEXT    NOT NULL,
    state                    TEXT    NOT NULL
        CHECK (state IN ('proposed', 'approved', 'committed', 'revoked', 'cancelled', 'expired')),
    cancelled                BOOLEAN NOT NULL DEFAULT FALSE
);
INSERT INTO plans_rebuilt (id, machine_id, release_id, artifact_digest, key_provider, key_id, key_version, identity_kind, identity_value, cluster_id, assignment_revision, desired_release, baseline_revision, pre_dispatch_digest, bound_drift, operation_kind, mode, route, talos_minor, max_evidence_age_ms, transport_deadline_ms, verification_deadline_ms, max_attempts, rollout_scope, rollout_limit, expires_at_ms, creator_id, creator_role, state, cancelled)
    SELECT id, machine_id, release_id, artifact_digest, key_provider, key_id, key_version, identity_kind, identity_value, cluster_id, assignment_revision, desired_release, baseline_revision, pre_dispatch_digest, bound_drift, operation_kind, mode, route, talos_minor, max_evidence_age_ms, transport_deadline_ms, verification_deadline_ms, max_attempts, rollout_scope, rollout_limit, expires_at_ms, creator_id, creator_role, state, cancelled FROM plans;
DROP TABLE plans;
ALTER TABLE plans_rebuilt RENAME TO plans;

CREATE TABLE operations_rebuilt (
    id                 TEXT    NOT NULL PRIMARY KEY,
    -- One plan, one operation (§8 invariant 12, comparison 0).
    plan_id            TEXT    NOT NULL UNIQUE REFERENCES plans (id),
    machine_id         TEXT    NOT NULL REFERENCES machines (id),
    rollout_scope      TEXT    NOT NULL,
    kind               TEXT    NOT NULL DEFAULT 'apply_config',
    state              TEXT    NOT NULL
        CHECK (state IN ('committed', 'sending', 'verifying', 'completed', 'rejected', 'failed', 'cancelled', 'unresolved')),
    owner_controller   BLOB   NOT NULL,
    owner_generation   INTEGER  NOT NULL,
    owner_epoch        BLOB   NOT NULL,
    attempts           INTEGER  NOT NULL DEFAULT 0,
    commit_revision    INTEGER  NOT NULL,
    retry_revision     INTEGER,
    retry_controller   BLOB,
    retry_generation   INTEGER,
    retry_epoch        BLOB,
    last_fact_revision INTEGER,
    restored           BOOLEAN NOT NULL DEFAULT FALSE
);
INSERT INTO operations_rebuilt (id, plan_id, machine_id, rollout_scope, kind, state, owner_controller, owner_generation, owner_epoch, attempts, commit_revision, retry_revision, retry_controller, retry_generation, retry_epoch, last_fact_revision, restored)
    SELECT id, plan_id, machine_id, rollout_scope, kind, state, owner_controller, owner_generation, owner_epoch, attempts, commit_revision, retry_revision, retry_controller, retry_generation, retry_epoch, last_fact_revision, restored FROM operations;
DROP TABLE operations;
ALTER TABLE operations_rebuilt RENAME TO operations;

CREATE TABLE blanket_approvals_rebuilt (
    id          TEXT    NOT NULL PRIMARY KEY,
    cluster_id  TEXT    NOT NULL,
    approver_id TEXT    NOT NULL REFERENCES principals (id),
    reason      TEXT    NOT NULL,
    epoch       BLOB    NOT NULL,
    granted_ms  INTEGER NOT NULL,
    revoked     BOOLEAN NOT NULL DEFAULT FALSE,
    revoked_by  TEXT    REFERENCES principals (id),
    revoked_ms  INTEGER
);
INSERT INTO blanket_approvals_rebuilt (id, cluster_id, approver_id, reason, epoch, granted_ms, revoked, revoked_by, revoked_ms)
    SELECT id, cluster_id, approver_id, reason, epoch, granted_ms, revoked, revoked_by, revoked_ms FROM blanket_approvals;
DROP TABLE blanket_approvals;
ALTER TABLE blanket_approvals_rebuilt RENAME TO blanket_approvals;

-- The indexes dropped with their tables, as 0001 and 0003 made them.
CREATE UNIQUE INDEX operations_machine_scope ON operations (machine_id)
    WHERE state IN ('committed', 'sending', 'verifying', 'unresolved');
CREATE UNIQUE INDEX operations_rollout_slot ON operations (rollout_scope)
    WHERE state IN ('committed', 'sending', 'verifying', 'unresolved');
CREATE UNIQUE INDEX blanket_approvals_one_live ON blanket_approvals (cluster_id)
    WHERE NOT revoked;

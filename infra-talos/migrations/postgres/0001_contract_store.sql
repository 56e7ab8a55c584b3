-- The controller's store: inventory, plans, approvals, operations, attempts,
-- observations and the append-only machine timeline (docs/contract.md §2-§7).

CREATE TABLE installation (
    id            SMALLINT PRIMARY KEY CHECK (id = 1),
    epoch         BYTEA    NOT NULL CHECK (length(epoch) = 16),
    recovery_mode BOOLEAN  NOT NULL DEFAULT FALSE
);

CREATE TABLE principals (
    id          TEXT    PRIMARY KEY,
    kind        TEXT    NOT NULL CHECK (kind IN ('human', 'token')),
    responsible TEXT,
    revoked     BOOLEAN NOT NULL DEFAULT FALSE
);

CREATE TABLE principal_roles (
    principal_id TEXT NOT NULL REFERENCES principals (id),
    role         TEXT NOT NULL,
    PRIMARY KEY (principal_id, role)
);

CREATE TABLE machines (
    id                  TEXT    PRIMARY KEY,
    identity_kind       TEXT    NOT NULL CHECK (identity_kind IN ('smbios_uuid', 'node_id')),
    identity_value      TEXT    NOT NULL,
    cluster_id          TEXT    NOT NULL,
    endpoint            TEXT    NOT NULL,
    rollout_scope       TEXT    NOT NULL,
    talos_minor         TEXT    NOT NULL,
    -- The per-machine revision counter (§4.1), advanced under this row's lock.
    revision            BIGINT  NOT NULL DEFAULT 0,
    assignment_revision BIGINT  NOT NULL DEFAULT 1,
    desired_release     TEXT,
    applied_release     TEXT,
    applied_digest      TEXT,
    applied_source      TEXT,
    baseline_revision   BIGINT  NOT NULL DEFAULT 0,
    frozen              BOOLEAN NOT NULL DEFAULT FALSE,
    released_epoch      BYTEA,
    open_drift          BIGINT,
    open_drift_digest   TEXT
);

CREATE TABLE releases (
    id           TEXT   PRIMARY KEY,
    published_by TEXT   NOT NULL,
    published_at BIGINT NOT NULL
);

CREATE TABLE release_contributions (
    release_id   TEXT NOT NULL REFERENCES releases (id),
    principal_id TEXT NOT NULL,
    contribution TEXT NOT NULL CHECK (contribution IN ('authored', 'published')),
    PRIMARY KEY (release_id, principal_id, contribution)
);

-- Sealed artifacts only: key coordinates, ciphertext and the plaintext's digest.
CREATE TABLE artifacts (
    release_id   TEXT   NOT NULL REFERENCES releases (id),
    machine_id   TEXT   NOT NULL REFERENCES machines (id),
    key_provider TEXT   NOT NULL,
    key_id       TEXT   NOT NULL,
    key_version  BIGINT NOT NULL,
    ciphertext   BYTEA  NOT NULL,
    digest       TEXT   NOT NULL CHECK (length(digest) = 64),
    PRIMARY KEY (release_id, machine_id)
);

CREATE TABLE plans (
    id                       TEXT    PRIMARY KEY,
    machine_id               TEXT    NOT NULL REFERENCES machines (id),
    release_id               TEXT    NOT NULL REFERENCES releases (id),
    artifact_digest          TEXT    NOT NULL,
    key_provider             TEXT    NOT NULL,
    key_id                   TEXT    NOT NULL,
    key_version              BIGINT  NOT NULL,
    identity_kind            TEXT    NOT NULL,
    identity_value           TEXT    NOT NULL,
    cluster_id               TEXT    NOT NULL,
    assignment_revision      BIGINT  NOT NULL,
    desired_release          TEXT    NOT NULL,
    baseline_revision        BIGINT  NOT NULL,
    pre_dispatch_digest      TEXT    NOT NULL,
    bound_drift              BIGINT,
    operation_kind           TEXT    NOT NULL DEFAULT 'apply_config',
    mode                     TEXT    NOT NULL DEFAULT 'no_reboot',
    route                    TEXT    NOT NULL,
    talos_minor              TEXT    NOT NULL,
    max_evidence_age_ms      BIGINT  NOT NULL,
    transport_deadline_ms    BIGINT  NOT NULL,
    verification_deadline_ms BIGINT  NOT NULL CHECK (transport_deadline_ms <= verification_deadline_ms),
    max_attempts             BIGINT  NOT NULL CHECK (max_attempts >= 1),
    rollout_scope            TEXT    NOT NULL,
    rollout_limit            BIGINT  NOT NULL DEFAULT 1 CHECK (rollout_limit = 1),
    expires_at_ms            BIGINT  NOT NULL,
    creator_id               TEXT    NOT NULL,
    creator_role             TEXT    NOT NULL,
    state                    TEXT    NOT NULL
        CHECK (state IN ('proposed', 'approved', 'committed', 'revoked', 'cancelled', 'expired')),
    cancelled                BOOLEAN NOT NULL DEFAULT FALSE
);

CREATE TABLE approvals (
    plan_id       TEXT    NOT NULL REFERENCES plans (id),
    seq           BIGINT  NOT NULL,
    approver_id   TEXT    NOT NULL REFERENCES principals (id),
    role          TEXT    NOT NULL CHECK (role = 'approver'),
    epoch         BYTEA   NOT NULL,
    self_approval TEXT    NOT NULL,
    revoked       BOOLEAN NOT NULL DEFAULT FALSE,
    revision      BIGINT  NOT NULL,
    PRIMARY KEY (plan_id, seq)
);

CREATE TABLE operations (
    id                 TEXT    PRIMARY KEY,
    -- One plan, one operation (§8 invariant 12, comparison 0).
    plan_id            TEXT    NOT NULL UNIQUE REFERENCES plans (id),
    machine_id         TEXT    NOT NULL REFERENCES machines (id),
    rollout_scope      TEXT    NOT NULL,
    kind               TEXT    NOT NULL DEFAULT 'apply_config',
    state              TEXT    NOT NULL
        CHECK (state IN ('committed', 'sending', 'verifying', 'completed', 'rejected', 'failed', 'cancelled', 'unresolved')),
    owner_controller   BYTEA   NOT NULL,
    owner_generation   BIGINT  NOT NULL,
    owner_epoch        BYTEA   NOT NULL,
    attempts           BIGINT  NOT NULL DEFAULT 0,
    commit_revision    BIGINT  NOT NULL,
    retry_revision     BIGINT,
    retry_controller   BYTEA,
    retry_generation   BIGINT,
    retry_epoch        BYTEA,
    last_fact_revision BIGINT,
    restored           BOOLEAN NOT NULL DEFAULT FALSE
);

-- Comparison 4 / invariant 1: one holding operation per machine scope.
CREATE UNIQUE INDEX operations_machine_scope ON operations (machine_id)
    WHERE state IN ('committed', 'sending', 'verifying', 'unresolved');
-- Comparison 5 / choice §10.5: the rollout slot, limit one.
CREATE UNIQUE INDEX operations_rollout_slot ON operations (rollout_scope)
    WHERE state IN ('committed', 'sending', 'verifying', 'unresolved');

CREATE TABLE attempts (
    operation_id             TEXT    NOT NULL REFERENCES operations (id),
    attempt_no               BIGINT  NOT NULL,
    revision                 BIGINT  NOT NULL,
    owner_controller         BYTEA   NOT NULL,
    owner_generation         BIGINT  NOT NULL,
    owner_epoch              BYTEA   NOT NULL,
    route                    TEXT    NOT NULL,
    transport_deadline_ms    BIGINT  NOT NULL,
    verification_deadline_ms BIGINT  NOT NULL CHECK (transport_deadline_ms <= verification_deadline_ms),
    response                 TEXT    NOT NULL DEFAULT 'pending',
    response_revision        BIGINT,
    accounted_by_decision    BOOLEAN NOT NULL DEFAULT FALSE,
    decision_revision        BIGINT,
    PRIMARY KEY (operation_id, attempt_no)
);

CREATE TABLE observation_starts (
    machine_id    TEXT   NOT NULL REFERENCES machines (id),
    basis         BIGINT NOT NULL,
    purpose       TEXT   NOT NULL,
    plan_id       TEXT,
    controller    BYTEA,
    started_at_ms BIGINT NOT NULL,
    PRIMARY KEY (machine_id, basis)
);

CREATE TABLE observations (
    machine_id          TEXT   NOT NULL,
    basis               BIGINT NOT NULL,
    recorded_revision   BIGINT NOT NULL,
    recorded_at_ms      BIGINT NOT NULL,
    smbios_uuid         TEXT,
    node_id             TEXT,
    cluster_id          TEXT,
    assignment_revision BIGINT,
    talos_version       TEXT,
    digest              TEXT,
    config_version      BIGINT,
    access_version      TEXT,
    PRIMARY KEY (machine_id, basis),
    FOREIGN KEY (machine_id, basis) REFERENCES observation_starts (machine_id, basis)
);

CREATE TABLE dependency_checks (
    machine_id        TEXT    NOT NULL REFERENCES machines (id),
    revision          BIGINT  NOT NULL,
    plan_id           TEXT    NOT NULL REFERENCES plans (id),
    controller        BYTEA   NOT NULL,
    access_path       TEXT    NOT NULL,
    access_version    TEXT    NOT NULL,
    artifact_decrypts BOOLEAN NOT NULL,
    checked_at_ms     BIGINT  NOT NULL,
    PRIMARY KEY (machine_id, revision)
);

-- The machine timeline (§4.1): one entry per revision, never changed or removed.
CREATE TABLE timeline (
    machine_id   TEXT     NOT NULL REFERENCES machines (id),
    revision     BIGINT   NOT NULL,
    kind         TEXT     NOT NULL,
    at_ms        BIGINT   NOT NULL,
    actor        TEXT     NOT NULL,
    actor_role   TEXT     NOT NULL,
    plan_id      TEXT,
    operation_id TEXT,
    comparison   SMALLINT,
    detail       TEXT     NOT NULL DEFAULT '',
    PRIMARY KEY (machine_id, revision)
);

CREATE FUNCTION refuse_journal_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'table % is append-only', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER timeline_append_only BEFORE UPDATE OR DELETE ON timeline
    FOR EACH ROW EXECUTE FUNCTION refuse_journal_change();
CREATE TRIGGER timeline_no_truncate BEFORE TRUNCATE ON timeline
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_journal_change();
CREATE TRIGGER observation_starts_append_only BEFORE UPDATE OR DELETE ON observation_starts
    FOR EACH ROW EXECUTE FUNCTION refuse_journal_change();
CREATE TRIGGER observations_append_only BEFORE UPDATE OR DELETE ON observations
    FOR EACH ROW EXECUTE FUNCTION refuse_journal_change();
CREATE TRIGGER dependency_checks_append_only BEFORE UPDATE OR DELETE ON dependency_checks
    FOR EACH ROW EXECUTE FUNCTION refuse_journal_change();

-- Blanket approvals: an approver's recorded decision that plans for the machines of
-- one cluster are approved as they are made, for clusters run in direct mode. Each
-- approval made under one names it; revoking it revokes those approvals; it holds
-- only in the installation epoch it was granted in.

CREATE TABLE blanket_approvals (
    id          TEXT    PRIMARY KEY,
    cluster_id  TEXT    NOT NULL,
    approver_id TEXT    NOT NULL REFERENCES principals (id),
    reason      TEXT    NOT NULL,
    epoch       BLOB    NOT NULL,
    granted_ms  INTEGER NOT NULL,
    revoked     BOOLEAN NOT NULL DEFAULT FALSE,
    revoked_by  TEXT    REFERENCES principals (id),
    revoked_ms  INTEGER
);

-- At most one blanket approval in force per cluster.
CREATE UNIQUE INDEX blanket_approvals_one_live ON blanket_approvals (cluster_id)
    WHERE NOT revoked;

-- The blanket approval an approval was made under; NULL for an approver's own act.
ALTER TABLE approvals ADD COLUMN blanket_id TEXT REFERENCES blanket_approvals (id);

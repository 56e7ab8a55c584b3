-- What each recovery-mode entry recorded (§7.2): when every pre-restore controller
-- instance was stopped, and which backup of which family was restored, with its age
-- at the entry. Both are facts of the record, never changed.
CREATE TABLE recovery_entries (
    epoch         BYTEA  PRIMARY KEY,
    entered_at_ms BIGINT NOT NULL,
    stopped_at_ms BIGINT NOT NULL CHECK (stopped_at_ms <= entered_at_ms),
    actor_id      TEXT   NOT NULL,
    controller    BYTEA  NOT NULL
);

CREATE TABLE restored_backups (
    epoch       BYTEA  NOT NULL REFERENCES recovery_entries (epoch),
    family      TEXT   NOT NULL,
    backup      TEXT   NOT NULL,
    taken_at_ms BIGINT NOT NULL,
    age_ms      BIGINT NOT NULL CHECK (age_ms >= 0),
    PRIMARY KEY (epoch, family)
);

CREATE TRIGGER recovery_entries_append_only BEFORE UPDATE OR DELETE ON recovery_entries
    FOR EACH ROW EXECUTE FUNCTION refuse_journal_change();
CREATE TRIGGER restored_backups_append_only BEFORE UPDATE OR DELETE ON restored_backups
    FOR EACH ROW EXECUTE FUNCTION refuse_journal_change();

-- The stop the current entry recorded: the §5.2 condition 2 time for every
-- pre-restore scope. An entry made before this migration recorded none; its entry
-- time stands for it, the latest the stop can have been.
ALTER TABLE installation ADD COLUMN recovery_stopped_at_ms BIGINT;
UPDATE installation SET recovery_stopped_at_ms = recovery_entered_at_ms WHERE recovery_mode;

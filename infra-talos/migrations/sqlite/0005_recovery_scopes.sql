-- Recovery scope states (§7.4), persisted per machine: `normal` outside recovery mode,
-- `pre_restore_unaccounted` from entry until the step 1 accounting decision, then
-- `unresolved`, `blocked:<reason>` or `ready` as marked, and `released`. The Desired
-- release a mark checked is kept, since a release needs it unchanged (§7.3 step 7),
-- with the revision of the scope's step 1 decision (a restoration observation must
-- follow it). The installation records when recovery mode was entered: the stop of
-- every pre-restore instance is taken to be no later than that.
ALTER TABLE machines ADD COLUMN scope_state TEXT NOT NULL DEFAULT 'normal';
ALTER TABLE machines ADD COLUMN scope_mark_desired TEXT;
ALTER TABLE machines ADD COLUMN scope_decision_revision BIGINT;
ALTER TABLE installation ADD COLUMN recovery_entered_at_ms BIGINT;

-- A store migrated while recovery mode is in effect has no scope states to carry over:
-- every scope starts pre-restore unaccounted (a release made before is withdrawn, so
-- the gate and the state agree), and the migration's time stands for the entry's, the
-- latest the pre-restore instances can have stopped.
UPDATE machines SET scope_state = 'pre_restore_unaccounted', released_epoch = NULL
    WHERE (SELECT recovery_mode FROM installation WHERE id = 1);
UPDATE installation SET recovery_entered_at_ms = CAST(unixepoch('subsec') * 1000 AS INTEGER) WHERE recovery_mode;

-- Every table's own identifier is NOT NULL. On PostgreSQL a PRIMARY KEY column is
-- NOT NULL already, so nothing changes here; on SQLite this version rebuilds the six
-- tables whose `TEXT PRIMARY KEY` allowed NULL. The version exists on both so that a
-- schema version means the same tables on both stores.
-- A statement, so that the migration is not empty.
SELECT 1;

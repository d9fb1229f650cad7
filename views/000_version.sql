-- store_version: the applied schema version, for tools that read the file directly.
CREATE VIEW store_version AS
SELECT max(version_id) AS version FROM goose_db_version WHERE is_applied = 1;

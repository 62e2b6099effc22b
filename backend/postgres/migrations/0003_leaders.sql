-- kyu schema version 3: the Leader leases (backend.Leader), by which one
-- process per store is elected to run maintenance. {{schema}} is replaced
-- by the quoted schema name.
--
-- A row is kept after its lease ends (holder '' after a resignation), so
-- its epoch counts on. A lease is live while holder <> '' and the caller's
-- now is before expires_at.
CREATE TABLE {{schema}}.leaders (
    name       text        PRIMARY KEY,
    holder     text        NOT NULL,
    epoch      bigint      NOT NULL,
    expires_at timestamptz NOT NULL
);

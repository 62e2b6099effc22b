-- kyu schema version 2: the Leader leases (backend.Leader), by which one
-- process per store is elected to run maintenance. {{p}} is replaced by
-- the store's table prefix.
--
-- A row is kept after its lease ends (holder '' after a resignation), so
-- its epoch counts on. A lease is live while holder <> '' and the caller's
-- now is before expires_at (Unix microseconds). Name and holder are
-- binary, so that no collation makes two names equal.
CREATE TABLE IF NOT EXISTS {{p}}leaders (
    name       VARBINARY(256) NOT NULL,
    holder     VARBINARY(256) NOT NULL,
    epoch      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB;

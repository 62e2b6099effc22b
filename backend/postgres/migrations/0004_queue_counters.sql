-- kyu schema version 4: ended attempts per queue and minute, for each
-- queue's recent throughput and error rate (backend.QueueInfo's
-- LastFiveMinutes and LastHour). {{schema}} is replaced by the quoted
-- schema name.
--
-- Sharded as the store-wide counters are (the server process id of the
-- connection, modulo 8) and read as sums; ApplyRetention deletes the
-- minutes older than backend.QueueStatsHistory.
CREATE TABLE {{schema}}.queue_counters (
    queue     text        NOT NULL,
    minute    timestamptz NOT NULL,
    shard     smallint    NOT NULL,
    processed bigint      NOT NULL DEFAULT 0,
    failed    bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, minute, shard)
);

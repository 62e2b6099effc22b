-- kyu schema version 3: ended attempts per queue and minute, for each
-- queue's recent throughput and error rate (backend.QueueInfo's
-- LastFiveMinutes and LastHour). {{p}} is replaced by the store's table
-- prefix.
--
-- Written in the transactions that count the store-wide counters, in the
-- same few shards per minute, and read as sums; ApplyRetention deletes
-- the minutes older than backend.QueueStatsHistory.
CREATE TABLE IF NOT EXISTS {{p}}queue_counters (
    queue     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    minute    BIGINT NOT NULL,
    shard     TINYINT NOT NULL,
    processed BIGINT NOT NULL DEFAULT 0,
    failed    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, minute, shard),
    KEY queue_counters_minute (minute)
) ENGINE=InnoDB;

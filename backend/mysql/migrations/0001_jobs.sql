-- kyu schema version 1 for MySQL 8 and MariaDB 10.6+. {{p}} is replaced by
-- the store's table prefix. Every table is InnoDB in utf8mb4; times are
-- Unix microseconds in BIGINT (NULL for none), so no session time zone
-- can shift them; durations are nanoseconds.

CREATE TABLE IF NOT EXISTS {{p}}jobs (
    id               CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    queue            VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    state            VARCHAR(9) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    priority         SMALLINT NOT NULL,
    -- neg_priority orders claims by priority, highest first, in an
    -- ascending index (MariaDB before 10.8 keeps no descending keys).
    neg_priority     SMALLINT AS (-priority) STORED,
    run_at           BIGINT NOT NULL,
    type             VARCHAR(256) COLLATE utf8mb4_bin NOT NULL,
    title            TEXT COLLATE utf8mb4_bin NOT NULL,
    attempt          INT NOT NULL DEFAULT 0,
    max_attempts     INT NOT NULL,
    lease_token      BIGINT NOT NULL DEFAULT 0,
    timeout_ns       BIGINT NOT NULL,
    deadline         BIGINT NULL,
    unique_key       VARBINARY(1024) NULL,
    unique_for_ns    BIGINT NOT NULL DEFAULT 0,
    retention_ns     BIGINT NOT NULL DEFAULT 0,
    created_at       BIGINT NOT NULL,
    started_at       BIGINT NULL,
    finished_at      BIGINT NULL,
    -- expires_at is when retention deletes a final job: NULL while the
    -- job is not final, or when it is kept forever.
    expires_at       BIGINT NULL,
    lease_expires_at BIGINT NULL,
    worker_id        VARCHAR(256) COLLATE utf8mb4_bin NULL,
    cancel_reason    VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    tags             TEXT COLLATE utf8mb4_bin NULL,
    metadata         MEDIUMTEXT COLLATE utf8mb4_bin NULL,
    errors           LONGTEXT COLLATE utf8mb4_bin NULL,
    progress         TEXT COLLATE utf8mb4_bin NULL,
    log_count        INT NOT NULL DEFAULT 0,
    logs_dropped     INT NOT NULL DEFAULT 0,
    payload          LONGBLOB NOT NULL,
    result           LONGBLOB NULL,
    -- Index keys that are NULL for most of a job's life, so that the
    -- steps of a plain job (pending, active, completed) leave their
    -- entries alone: timer_at is when a waiting job needs a maintenance
    -- step (a scheduled or retry job's run-at, or its deadline if
    -- earlier; a pending job's deadline), final_state the state once it
    -- is final.
    timer_at         BIGINT AS (CASE WHEN state IN ('scheduled', 'retry') THEN LEAST(run_at, COALESCE(deadline, run_at))
                                     WHEN state = 'pending' THEN deadline END) STORED,
    final_state      VARCHAR(9) CHARACTER SET ascii COLLATE ascii_bin
        AS (CASE WHEN state IN ('completed', 'failed', 'cancelled') THEN state END) STORED,
    PRIMARY KEY (id),
    -- Claims: a queue's pending jobs in claim order; also the counts per
    -- state and queue, and listings of the states that are not final,
    -- which read only the entries of their state.
    KEY jobs_claim (state, queue, neg_priority, run_at, id),
    -- Promotion and deadlines, lease recovery (lease_expires_at is NULL
    -- unless the job is active) and retention (expires_at is NULL until
    -- the job is final).
    KEY jobs_timer (timer_at),
    KEY jobs_lease (lease_expires_at),
    KEY jobs_expires (expires_at),
    -- Listing and purging final jobs in id order, by queue or across
    -- queues: millions of completed jobs never stand in the way of a
    -- listing of another state.
    KEY jobs_final (final_state, queue, id),
    KEY jobs_final_all (final_state, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A unique key is held by one job at a time. held_until is set for a key
-- with a UniqueFor period (held until then, whatever the job does);
-- otherwise the key is held while its job exists and is not final.
-- job_state is the state the job had when it was deleted.
CREATE TABLE IF NOT EXISTS {{p}}unique_keys (
    queue      VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    ukey       VARBINARY(1024) NOT NULL,
    job_id     CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    held_until BIGINT NULL,
    job_state  VARCHAR(9) CHARACTER SET ascii COLLATE ascii_bin NULL,
    PRIMARY KEY (queue, ukey),
    KEY unique_keys_until (held_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A queue's settings; a queue without a row runs with the default
-- retention. retain_* are backend.Retention values (nanoseconds, 0 the
-- default, -1 none, -2 forever).
CREATE TABLE IF NOT EXISTS {{p}}queues (
    name             VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    paused           BOOLEAN NOT NULL DEFAULT FALSE,
    retain_completed BIGINT NOT NULL DEFAULT 0,
    retain_failed    BIGINT NOT NULL DEFAULT 0,
    retain_cancelled BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Log lines of a job, seq from 0; deleted with the job.
CREATE TABLE IF NOT EXISTS {{p}}job_logs (
    job_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    seq    INT NOT NULL,
    at     BIGINT NOT NULL,
    line   TEXT COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (job_id, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Ended attempts per minute (backend.MinuteCount), in a few shards per
-- minute so that concurrent completions do not queue on one row; read as
-- sums. Minutes older than StatsHistory are folded by ApplyRetention into
-- the row of minute -1, which keeps the totals.
CREATE TABLE IF NOT EXISTS {{p}}counters (
    minute    BIGINT NOT NULL,
    shard     TINYINT NOT NULL,
    processed BIGINT NOT NULL DEFAULT 0,
    failed    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, shard)
) ENGINE=InnoDB;

-- The number of final jobs per queue and state, in a few shards per
-- queue and state so that concurrent completions do not queue on one
-- row; read as sums. Kept by the statements that make jobs final, retry
-- or delete them, in their transactions, so that Stats need not count
-- millions of finished rows.
CREATE TABLE IF NOT EXISTS {{p}}final_counts (
    queue VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    state VARCHAR(9) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    shard TINYINT NOT NULL,
    n     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, state, shard)
) ENGINE=InnoDB;

-- Wake-ups: each queue's version, in a few shards, bumped after jobs
-- become pending in it; idle workers poll the sums.
CREATE TABLE IF NOT EXISTS {{p}}signals (
    queue   VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    shard   TINYINT NOT NULL,
    version BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, shard)
) ENGINE=InnoDB;

-- The worker registry: each entry is a backend.WorkerInfo as JSON.
CREATE TABLE IF NOT EXISTS {{p}}workers (
    id         VARCHAR(256) COLLATE utf8mb4_bin NOT NULL,
    expires_at BIGINT NOT NULL,
    info       MEDIUMTEXT COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

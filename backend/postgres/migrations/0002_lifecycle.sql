-- kyu schema version 2: the lifecycle operations (cancel, progress and
-- logs, finish watches, queue settings, listing, stats, worker registry).
-- {{schema}} is replaced by the quoted schema name.
--
-- delete_at keeps its name and is the job's ExpiresAt: since version 2 it
-- is decided by backend.Expiry (the job's retention, then its queue's
-- override for the final state, then the default) when the job becomes
-- final.

-- Every column added here has a constant default, so adding it rewrites
-- nothing. cancel_requested: Cancel of an active job. watched: someone
-- called WatchFinished for the job, so the statement that ends or deletes
-- it sends a NOTIFY (no other finish notifies). progress: the latest
-- backend.Progress as JSON. log_count and logs_dropped: the lines in
-- job_logs and those past the cap.
ALTER TABLE {{schema}}.jobs
    ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false,
    ADD COLUMN watched          boolean NOT NULL DEFAULT false,
    ADD COLUMN progress         jsonb,
    ADD COLUMN log_count        integer NOT NULL DEFAULT 0,
    ADD COLUMN logs_dropped     integer NOT NULL DEFAULT 0;

-- Listing and purging final jobs by queue in id order. One partial index
-- per final state: a job enters one of them once, when it becomes final,
-- so claims never touch them and a completion writes one entry more. The
-- other states are small and listed through the indexes of version 1 (or
-- by a sort of their rows).
CREATE INDEX jobs_completed ON {{schema}}.jobs (queue, id) WHERE state = 'completed';
CREATE INDEX jobs_failed ON {{schema}}.jobs (queue, id) WHERE state = 'failed';
CREATE INDEX jobs_cancelled ON {{schema}}.jobs (queue, id) WHERE state = 'cancelled';

-- A queue's settings; a queue without a row runs with the default
-- retention. retain_* are backend.Retention values (nanoseconds, 0 the
-- default, -1 none, -2 forever).
CREATE TABLE {{schema}}.queues (
    name             text    PRIMARY KEY,
    paused           boolean NOT NULL DEFAULT false,
    retain_completed bigint  NOT NULL DEFAULT 0,
    retain_failed    bigint  NOT NULL DEFAULT 0,
    retain_cancelled bigint  NOT NULL DEFAULT 0
);

-- Log lines of a job, seq from 0; deleted by the statements that delete
-- the job (no foreign key: the statements delete them as a set, where a
-- cascade would fire a trigger per job).
CREATE TABLE {{schema}}.job_logs (
    job_id uuid        NOT NULL,
    seq    integer     NOT NULL,
    at     timestamptz NOT NULL,
    line   text        NOT NULL,
    PRIMARY KEY (job_id, seq)
);

-- Ended attempts per minute (backend.MinuteCount), in a few shards per
-- minute (the server process id of the connection, modulo 8) so that
-- concurrent completions do not queue on one row; read as sums. Minutes
-- older than StatsHistory are folded by ApplyRetention into the row of
-- minute '-infinity', which keeps the totals.
CREATE TABLE {{schema}}.counters (
    minute    timestamptz NOT NULL,
    shard     smallint    NOT NULL,
    processed bigint      NOT NULL DEFAULT 0,
    failed    bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, shard)
);

-- The worker registry: each entry is a backend.WorkerInfo as JSON.
CREATE TABLE {{schema}}.workers (
    id         text        PRIMARY KEY,
    expires_at timestamptz NOT NULL,
    info       jsonb       NOT NULL
);

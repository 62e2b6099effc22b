-- kyu schema version 1: jobs, unique keys, and the function that takes a
-- unique key. {{schema}} is replaced by the quoted schema name.

CREATE TABLE {{schema}}.jobs (
    id               uuid        PRIMARY KEY,
    run_at           timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    lease_expires_at timestamptz,
    deadline         timestamptz,
    started_at       timestamptz,
    finished_at      timestamptz,
    -- delete_at is when retention deletes a final job; NULL while the job
    -- is not final or when it is kept forever.
    delete_at        timestamptz,
    lease_token      bigint      NOT NULL DEFAULT 0,
    timeout_ns       bigint      NOT NULL,
    unique_for_ns    bigint      NOT NULL DEFAULT 0,
    retention_ns     bigint      NOT NULL DEFAULT 0,
    attempt          integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL,
    priority         smallint    NOT NULL,
    state            text        NOT NULL
        CHECK (state IN ('scheduled', 'pending', 'active', 'retry', 'completed', 'failed', 'cancelled')),
    queue            text        NOT NULL,
    type             text        NOT NULL,
    title            text        NOT NULL DEFAULT '',
    unique_key       text,
    worker_id        text,
    cancel_reason    text,
    tags             jsonb,
    metadata         jsonb,
    errors           jsonb,
    payload          bytea       NOT NULL,
    result           bytea
) WITH (
    -- Every job row is written a few times and then deleted: vacuum early
    -- and often so the claim index does not fill with dead entries.
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02
);

-- Claims: the pending jobs of one queue in claim order.
CREATE INDEX jobs_claim ON {{schema}}.jobs (queue, priority DESC, run_at, id) WHERE state = 'pending';
-- Promotion: scheduled and retry jobs by run-at.
CREATE INDEX jobs_due ON {{schema}}.jobs (run_at) WHERE state IN ('scheduled', 'retry');
-- Deadlines of jobs that have not started.
CREATE INDEX jobs_deadline ON {{schema}}.jobs (deadline)
    WHERE deadline IS NOT NULL AND state IN ('scheduled', 'pending', 'retry');
-- Lease recovery: active jobs by lease expiry.
CREATE INDEX jobs_lease ON {{schema}}.jobs (lease_expires_at) WHERE state = 'active';
-- Retention: final jobs by the time they are deleted.
CREATE INDEX jobs_delete_at ON {{schema}}.jobs (delete_at) WHERE delete_at IS NOT NULL;
-- No index on (queue, state, id) yet: every job row is written three
-- times (enqueue, claim, finish) and such an index would take an entry
-- each time, a third of the index writes of a claim or a completion. The
-- migration that brings listings adds the indexes they need, partial
-- where it can.

-- A unique key is held by one job at a time. held_until is set for a key
-- with a UniqueFor period (held until then, whatever the job does);
-- otherwise the key is held while its job exists and is not final.
-- job_state is the state the job had when it was deleted.
CREATE TABLE {{schema}}.unique_keys (
    queue      text        NOT NULL,
    key        text        NOT NULL,
    job_id     uuid        NOT NULL,
    held_until timestamptz,
    job_state  text,
    PRIMARY KEY (queue, key)
);
CREATE INDEX unique_keys_until ON {{schema}}.unique_keys (held_until) WHERE held_until IS NOT NULL;

-- take_unique_key gives the key (p_queue, p_key) to the job p_job unless
-- another job holds it at p_now; then it returns that holder's id and state
-- and changes nothing.
CREATE FUNCTION {{schema}}.take_unique_key(
    p_queue text, p_key text, p_job uuid, p_until timestamptz, p_now timestamptz,
    OUT holder uuid, OUT holder_state text)
LANGUAGE plpgsql AS $$
DECLARE
    k {{schema}}.unique_keys%ROWTYPE;
    js text;
BEGIN
    LOOP
        INSERT INTO {{schema}}.unique_keys (queue, key, job_id, held_until)
        VALUES (p_queue, p_key, p_job, p_until)
        ON CONFLICT (queue, key) DO NOTHING;
        IF FOUND THEN
            RETURN;
        END IF;
        SELECT * INTO k FROM {{schema}}.unique_keys
        WHERE queue = p_queue AND key = p_key FOR UPDATE;
        -- The row may have been forgotten since the insert: try again.
        EXIT WHEN FOUND;
    END LOOP;
    SELECT state INTO js FROM {{schema}}.jobs WHERE id = k.job_id;
    IF (k.held_until IS NOT NULL AND p_now < k.held_until)
        OR (k.held_until IS NULL AND js IS NOT NULL AND js NOT IN ('completed', 'failed', 'cancelled')) THEN
        holder := k.job_id;
        holder_state := coalesce(js, k.job_state);
        RETURN;
    END IF;
    UPDATE {{schema}}.unique_keys
    SET job_id = p_job, held_until = p_until, job_state = NULL
    WHERE queue = p_queue AND key = p_key;
END
$$;

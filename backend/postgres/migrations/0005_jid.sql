-- kyu schema version 5: a job's JID (backend.NewJob.JID), the caller's own
-- id for it, unique across the schema while the job exists. {{schema}} is
-- replaced by the quoted schema name.
--
-- The column has no default, so adding it rewrites nothing; jobs without
-- a JID keep it NULL. The unique index is partial: a job without a JID
-- takes no entry in it, so its enqueue writes no more index entries than
-- before. Deleting a job (by request, purge or retention) frees its JID
-- with its row.
ALTER TABLE {{schema}}.jobs ADD COLUMN jid text;
CREATE UNIQUE INDEX jobs_jid ON {{schema}}.jobs (jid) WHERE jid IS NOT NULL;

-- lock_jids serializes the enqueues of the same JIDs and tells which are
-- held: it takes the transaction-scoped advisory locks p_keys (the store
-- hashes each JID with the schema's name to one key, and passes them
-- sorted, so that two callers never wait on each other in a circle), and
-- then returns the jobs that hold the JIDs p_jids. Each statement of a
-- volatile function reads a fresh snapshot, so under READ COMMITTED the
-- holders include a job whose transaction committed while this one
-- waited for its lock. The unique index stays the last word: a writer
-- that skipped the locks fails with a unique violation rather than
-- writing a second holder.
CREATE FUNCTION {{schema}}.lock_jids(
    p_keys bigint[], p_jids text[],
    OUT jid text, OUT holder uuid, OUT holder_state text)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    k bigint;
BEGIN
    FOREACH k IN ARRAY p_keys LOOP
        PERFORM pg_advisory_xact_lock(k);
    END LOOP;
    RETURN QUERY SELECT j.jid, j.id, j.state FROM {{schema}}.jobs j WHERE j.jid = ANY (p_jids);
END
$$;

-- kyu schema version 4: a job's JID (backend.NewJob.JID), the caller's own
-- id for it, unique among the jobs of the prefix while the job exists.
-- {{p}} is replaced by the store's table prefix.
--
-- Binary, so that two JIDs are equal only byte for byte (a _bin collation
-- of utf8mb4 would still ignore trailing spaces); backend.MaxJID bytes,
-- so the whole value is the key. A job without a JID keeps it NULL, and a
-- unique key holds any number of NULLs. Deleting a job (by request, purge
-- or retention) frees its JID with its row. The column is added on its
-- own (at the end of the row, which needs no copy of the table) and the
-- index next (built while writes go on); Migrate takes an error saying
-- that either exists already as done, for a step cut short.
ALTER TABLE {{p}}jobs ADD COLUMN jid VARBINARY(256) NULL;
ALTER TABLE {{p}}jobs ADD UNIQUE KEY jobs_jid (jid);

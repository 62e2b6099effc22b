-- enqueue_lean.lua: writes new jobs of one queue that are all pending,
-- with no deadline, unique key or JID, as enqueue.lua does, taking only
-- the keys such jobs touch. ARGV: as enqueue.lua's. Returns what
-- enqueue.lua returns.
--
-- KEYS: only jobs, ready and queue_name (see its entry in scripts.go):
-- enqueueJobs of common.lua reaches the other keys only for jobs that
-- are scheduled or have a deadline, a unique key or a JID.

return enqueueJobs()

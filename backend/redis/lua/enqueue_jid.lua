-- enqueue_jid.lua: writes new jobs of one queue, some of which have a
-- JID: enqueue.lua with the JID index among its keys.
--
-- ARGV and Returns: as enqueue.lua's, with one JID per job ("" for none)
-- after the jobs' values.
--
-- KEYS: only jobs, ready, waiting, deadlines, unique, unique_ends,
-- queue_name, in_s and jids (see its entry in scripts.go), each at its
-- position among the queue's keys.

return enqueueJobs()

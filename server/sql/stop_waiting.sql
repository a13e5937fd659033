-- stop_waiting: the worker was told it is at its end (nothing it should wait
-- for): it no longer counts as a waiting holder (see at_end.sql).
UPDATE shardline_worker
   SET waiting_since = NULL
 WHERE job_id = %(job)s AND name = %(worker)s AND waiting_since IS NOT NULL;

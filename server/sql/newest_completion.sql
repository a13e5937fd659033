-- newest_completion: the sequence number of job %(job)s's newest completion
-- (0 before any), a snapshot's position. Served backwards from the partial
-- index item_completion_seq: one probe whatever the size of the job.
SELECT coalesce(max(seq), 0) AS seq FROM shardline_item WHERE job_id = %(job)s AND seq IS NOT NULL;

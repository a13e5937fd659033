-- finish_if_done: marks the job done when nothing is left to hand out or to
-- finish, after a standalone complete or fail (a take that finds the job
-- exhausted does the same through jobs.mark_done). One guarded statement,
-- read from the partial indexes on pending and leased items; a row comes
-- back only when this call finished the job.
UPDATE shardline_job AS j
   SET state = 'done', finished_at = now(), updated_at = now()
 WHERE j.id = %(job)s AND j.state IN ('ready', 'running')
   AND j.epochs_materialised = j.num_epochs
   AND NOT EXISTS (SELECT 1 FROM shardline_item WHERE job_id = %(job)s AND state = 'pending')
   AND NOT EXISTS (SELECT 1 FROM shardline_item WHERE job_id = %(job)s AND state = 'leased')
RETURNING j.id;

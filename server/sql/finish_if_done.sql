-- finish_if_done: marks the job done when nothing is left to hand out or to
-- finish, after a standalone complete or fail (a take that finds the job
-- exhausted comes here too, through jobs.mark_done). One guarded statement,
-- read from the partial indexes on pending and leased items; a row comes
-- back only when this call finished the job.
--
-- finished_at is clock_timestamp(), read after this statement's snapshot:
-- never before a completion the guard saw. now() is the transaction's start,
-- earlier than completions other sessions committed since when a take runs
-- in a transaction (a synchronous rank's quota, services/leases.py).
UPDATE shardline_job AS j
   SET state = 'done', finished_at = clock_timestamp(), updated_at = shardline_now()
 WHERE j.id = %(job)s AND j.state IN ('ready', 'running')
   AND j.epochs_materialised = j.num_epochs
   AND NOT EXISTS (SELECT 1 FROM shardline_item WHERE job_id = %(job)s AND state = 'pending')
   AND NOT EXISTS (SELECT 1 FROM shardline_item WHERE job_id = %(job)s AND state = 'leased')
RETURNING j.id;

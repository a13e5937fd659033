-- stored_answer: the answer kept under request %(key)s on job %(job)s. Read
-- again by a repeat whose claim waited for the first request: claim_request's
-- own snapshot was taken before that request committed.
SELECT answer FROM shardline_take_request WHERE job_id = %(job)s AND key = %(key)s;

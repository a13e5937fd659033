-- answer_request: the answer of request %(key)s on job %(job)s, for its
-- repeats: stored by a take that ran more statements than take.sql's one.
UPDATE shardline_take_request
   SET answer = %(answer)s
 WHERE job_id = %(job)s AND holder = coalesce(%(holder)s::bigint, 0) AND key = %(key)s;

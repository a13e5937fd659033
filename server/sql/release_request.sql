-- release_request: request %(key)s on job %(job)s raised: a repeat runs again
-- (and meets the same error, or succeeds if what made it fail has passed).
DELETE FROM shardline_take_request
 WHERE job_id = %(job)s AND holder = coalesce(%(holder)s::bigint, 0) AND key = %(key)s;

-- stored_request: the record of request %(key)s on job %(job)s, for a repeat:
-- whether take.sql's statement answered it whole, the answer stored by a take
-- that ran more statements (NULL until it was answered), and its age in
-- seconds (a record that stays unanswered is one whose server died).
SELECT whole, answer, extract(epoch FROM now() - created_at) AS age
  FROM shardline_take_request
 WHERE job_id = %(job)s AND key = %(key)s;

-- answer_request: the answer of request %(key)s on job %(job)s, for its repeats.
UPDATE shardline_take_request
   SET answer = %(answer)s
 WHERE job_id = %(job)s AND key = %(key)s;

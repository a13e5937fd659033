-- progress_rates: per job of %(ids)s, the completions of the current minute
-- and of the one before (shardline_throughput), and how far into the current
-- minute now is: progress.py weighs the previous minute by the part of it
-- still within the last 60 seconds.
SELECT job_id,
       coalesce(sum(done) FILTER (WHERE minute = date_trunc('minute', shardline_now())), 0)::bigint AS current,
       coalesce(sum(done) FILTER (WHERE minute < date_trunc('minute', shardline_now())), 0)::bigint AS previous,
       extract(epoch FROM shardline_now() - date_trunc('minute', shardline_now()))::float8 AS seconds_into
  FROM shardline_throughput
 WHERE job_id = ANY(%(ids)s::bigint[]) AND minute >= date_trunc('minute', shardline_now()) - interval '1 minute'
 GROUP BY job_id;

-- throughput: completions per minute of job %(job)s over its last
-- %(minutes)s minutes, oldest first, minutes without any included as zeros
-- (the job page's chart).
SELECT minute, coalesce(n, 0)::bigint AS done
  FROM generate_series(date_trunc('minute', shardline_now()) - make_interval(mins => %(minutes)s::int - 1),
                       date_trunc('minute', shardline_now()), interval '1 minute') AS minute
  LEFT JOIN (SELECT minute AS m, sum(done)::bigint AS n
               FROM shardline_throughput
              WHERE job_id = %(job)s
                AND minute >= date_trunc('minute', shardline_now()) - make_interval(mins => %(minutes)s::int - 1)
              GROUP BY 1) AS c ON c.m = minute
 ORDER BY minute;

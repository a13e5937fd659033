-- seen_waiting: workers whose takes wait on the server without running
-- (server/parking.py) are alive: their last_seen moves on, as a take's would.
-- One statement for all the parked takes of a server process.
UPDATE shardline_worker AS w
   SET last_seen = shardline_now()
  FROM unnest(%(jobs)s::bigint[], %(workers)s::text[]) AS p(job_id, name)
 WHERE w.job_id = p.job_id AND w.name = p.name;

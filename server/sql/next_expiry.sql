-- next_expiry: seconds until the earliest live lease of job %(job)s expires
-- (negative: one has expired and waits to be taken back; null: none is held).
-- Heartbeats move expiries without a notification, so a parked waiting take
-- (server/parking.py) that reaches the expiry it saw asks this, once per
-- process and job, instead of every parked take running again. Read from the
-- partial index of live leases (item_leased_expiry).
SELECT extract(epoch FROM min(expires_at) - shardline_now()) AS seconds
  FROM shardline_item
 WHERE job_id = %(job)s AND state = 'leased';

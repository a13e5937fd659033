-- database_now: the database's clock, which every lease time is written in,
-- so a timeline drawn against it agrees with leased_at and expires_at.
SELECT shardline_now() AS now;

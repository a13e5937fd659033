-- lock_job_name: serialises the creators of one job name until their
-- transaction ends, so that racing creates of one name make exactly one job;
-- creators of other names do not wait (a transaction-level advisory lock on
-- a 64-bit hash of the name).
SELECT pg_advisory_xact_lock(hashtextextended(%(name)s, 7));

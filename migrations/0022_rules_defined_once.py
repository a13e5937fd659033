"""Rules that several statements need, defined once (server/sql/schema.sql).

- ``shardline_worker_live``: a worker seen within twice its job's lease
  timeout and at least 30 s. The dashboard said ``greatest(2x, 30 s)`` while
  take.sql and propose_split.sql said ``2x``: under 5-s leases a worker idle
  for 15 s was live on the job page and gone to the split planner.
- ``shardline_in_epochs``: a take's epoch scope (take.sql and at_end.sql
  each spelled it), as a range that is an index condition in a generic plan.
- ``shardline_name_in_scope``: a token's job-name scope, which extend.sql,
  fail.sql and take.sql spelled out beside ``shardline_job_in_scope``.
- ``shardline_waiting_consumer``: the consumers waiting at the end of a
  queue (take.sql and at_end.sql each spelled it).

The text below is this migration's copy of those definitions; schema.sql
holds the present, and a test holds the migrated database to it.
"""

from django.db import migrations

RULES = r"""
CREATE OR REPLACE FUNCTION shardline_worker_live(last_seen timestamptz, lease_timeout double precision)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT last_seen > now() - make_interval(secs => greatest(2 * lease_timeout, 30))
$$;

CREATE OR REPLACE FUNCTION shardline_in_epochs(epoch integer, from_epoch integer, upto_epoch integer)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT epoch BETWEEN coalesce(from_epoch, 0) AND coalesce(upto_epoch, 2147483647)
$$;

CREATE OR REPLACE FUNCTION shardline_name_in_scope(name text, scope text[])
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT scope IS NULL OR name ~ ANY (scope)
$$;

CREATE OR REPLACE FUNCTION shardline_job_in_scope(job bigint, scope text[]) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN scope IS NULL OR EXISTS (SELECT FROM shardline_job AS j
                                     WHERE j.id = job AND shardline_name_in_scope(j.name, scope));
END
$$;

CREATE OR REPLACE VIEW shardline_waiting_consumer AS
    SELECT job_id, consumer
      FROM shardline_worker
     WHERE waiting_since IS NOT NULL;
"""

BEFORE = r"""
CREATE OR REPLACE FUNCTION shardline_job_in_scope(job bigint, scope text[]) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN scope IS NULL OR EXISTS (SELECT FROM shardline_job AS j WHERE j.id = job AND j.name ~ ANY (scope));
END
$$;
DROP VIEW IF EXISTS shardline_waiting_consumer;
DROP FUNCTION IF EXISTS shardline_name_in_scope(text, text[]);
DROP FUNCTION IF EXISTS shardline_in_epochs(integer, integer, integer);
DROP FUNCTION IF EXISTS shardline_worker_live(timestamptz, double precision);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0021_event_resumed_and_warning"),
    ]

    operations = [migrations.RunSQL(RULES, BEFORE)]

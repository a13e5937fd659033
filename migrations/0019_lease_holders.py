"""Leases bound to who holds them (issue 25): the holder of each lease, random fencing tokens, scoped tokens.

- ``shardline_item.holder_id``: the user whose token took the lease; the
  lease statements accept a completion, failure, heartbeat, release or split
  only from that user.
- ``shardline_fencing_token()``: 63 random bits from ``gen_random_uuid()``
  (core Postgres since 13, drawn from the server's strong random source), in
  place of the sequence shardline_token_seq (dropped), whose values (1, 2,
  3...) anyone could guess.
- ``shardline_job_in_scope(job, scope)``: the rule of server/callers.py for a
  scoped token, as the lease statements check it.
  Both in plpgsql: a SQL function Postgres cannot inline is planned again on
  every call, and these run on every lease (bench/RESULTS.md, "Trust checks").
- ``shardline_take_request`` keyed by (job, holder, key): an Idempotency-Key
  is the caller's. Its rows live minutes (a retry window), so they are
  dropped rather than given a holder they never had.
- ``shardline_api_token.jobs``: a token's job name patterns.
"""

import django.contrib.postgres.fields
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

FUNCTIONS = r"""
DROP SEQUENCE IF EXISTS shardline_token_seq;
CREATE OR REPLACE FUNCTION shardline_fencing_token() RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
DECLARE
    u text := replace(gen_random_uuid()::text, '-', '');
BEGIN
    -- 16 hex digits of a version-4 UUID, skipping its version digit (the
    -- 13th) and its variant digit (the 17th, two fixed bits): 64 random
    -- bits, of which the sign bit is dropped.
    RETURN greatest(
        ('x' || substr(u, 1, 12) || substr(u, 14, 3) || substr(u, 18, 1))::bit(64)::bigint & 9223372036854775807,
        1);
END
$$;

CREATE OR REPLACE FUNCTION shardline_job_in_scope(job bigint, scope text[]) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN scope IS NULL OR EXISTS (SELECT FROM shardline_job AS j WHERE j.id = job AND j.name ~ ANY (scope));
END
$$;
"""

DROP_FUNCTIONS = """
CREATE SEQUENCE IF NOT EXISTS shardline_token_seq AS bigint;
DROP FUNCTION IF EXISTS shardline_job_in_scope(bigint, text[]);
DROP FUNCTION IF EXISTS shardline_fencing_token();
"""

TAKE_REQUEST_KEY = """
DELETE FROM shardline_take_request;
ALTER TABLE shardline_take_request ADD COLUMN holder bigint NOT NULL DEFAULT 0;
ALTER TABLE shardline_take_request ALTER COLUMN holder DROP DEFAULT;
ALTER TABLE shardline_take_request DROP CONSTRAINT shardline_take_request_pkey;
ALTER TABLE shardline_take_request ADD CONSTRAINT shardline_take_request_pkey PRIMARY KEY (job_id, holder, key);
"""

TAKE_REQUEST_KEY_BACK = """
DELETE FROM shardline_take_request;
ALTER TABLE shardline_take_request DROP CONSTRAINT shardline_take_request_pkey;
ALTER TABLE shardline_take_request DROP COLUMN holder;
ALTER TABLE shardline_take_request ADD CONSTRAINT shardline_take_request_pkey PRIMARY KEY (job_id, key);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0018_event_released"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="item",
            name="holder",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="jobs",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=200), blank=True, default=list, size=None
            ),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(TAKE_REQUEST_KEY, TAKE_REQUEST_KEY_BACK)],
            state_operations=[
                migrations.AddField(
                    model_name="takerequest",
                    name="holder",
                    field=models.BigIntegerField(default=0),
                    preserve_default=False,
                ),
                migrations.AlterField(
                    model_name="takerequest",
                    name="pk",
                    field=models.CompositePrimaryKey(
                        "job", "holder", "key", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
            ],
        ),
        migrations.RunSQL(FUNCTIONS, DROP_FUNCTIONS),
    ]

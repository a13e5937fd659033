from django.db import migrations


class Migration(migrations.Migration):
    """Sequences of the lease protocol.

    shardline_token_seq: fencing tokens. Every lease takes a fresh value, so
    a token identifies one lease of one item for ever.
    shardline_completion_seq: completion order, for snapshots (a snapshot is
    a sequence number; restoring it re-opens everything completed after it).
    """

    dependencies = [("shardline", "0001_initial")]

    operations = [
        migrations.RunSQL(
            "CREATE SEQUENCE shardline_token_seq AS bigint;",
            "DROP SEQUENCE shardline_token_seq;",
        ),
        migrations.RunSQL(
            "CREATE SEQUENCE shardline_completion_seq AS bigint;",
            "DROP SEQUENCE shardline_completion_seq;",
        ),
        migrations.RunSQL(
            # Every item is updated two or three times per epoch (lease,
            # complete, retries): vacuum early so dead tuples do not pile up in
            # the partial indexes that take reads.
            "ALTER TABLE shardline_item SET (autovacuum_vacuum_scale_factor = 0.02,"
            " autovacuum_analyze_scale_factor = 0.02);",
            "ALTER TABLE shardline_item RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor);",
        ),
    ]

-- item_dead_rows: dead row versions in shardline_item, from Postgres's
-- statistics (0 before any are counted): what autovacuum has yet to remove
-- (/metrics, docs/deploy.md "Vacuum").
SELECT coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'shardline_item'), 0) AS dead;

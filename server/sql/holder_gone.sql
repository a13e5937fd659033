-- holder_gone: a process holding leases went away. Its waiting heartbeat's
-- connection dropped %(since)s seconds ago, unanswered (a process that dies
-- closes its sockets), and its holders have not beaten since: their leases
-- on the job expire now, so the next take hands them on (each an attempt,
-- as an expiry always was), not a lease timeout later.
--
-- Whether a lease was extended since, by facts of the lease alone (no clock
-- of the server's notice, which may come after a holder's quick retry):
-- one the dropped heartbeat extended (%(ids)s) was not if it still ends when
-- that heartbeat made it end; one it did not carry (taken while it waited)
-- was not if it still ends a lease timeout after it was leased, and it was
-- leased before the drop. A live holder whose connection blipped beats
-- again, with every lease it holds, and keeps them; so does a restarted
-- worker of the same name, whose resumed leases are newer than the drop.
-- Fenced as ever: a holder that comes back after its lease went to another
-- is told it is lost. Only the caller's own leases (holder, scope), as
-- extend.sql. With %(carried_only)s, only those the heartbeat carried: its
-- holders went silent after its answer (server/holders.py), and a lease
-- they took since may be beaten for by another heartbeat of theirs.
WITH beat AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(expiries)s::timestamptz[]) AS b(id, expires_at)
), gone AS (
    UPDATE shardline_item AS i
       SET expires_at = shardline_now() - interval '1 millisecond'
      FROM shardline_job AS j
     WHERE i.job_id = %(job)s AND j.id = i.job_id AND i.state = 'leased'
       AND i.worker = ANY (%(workers)s::text[])
       AND i.holder_id IS NOT DISTINCT FROM %(holder)s::bigint
       AND shardline_name_in_scope(j.name, %(scope)s::text[])
       AND i.expires_at > shardline_now()
       AND (NOT %(carried_only)s OR i.id = ANY (%(ids)s::bigint[]))
       AND coalesce(i.expires_at <= (SELECT b.expires_at FROM beat AS b WHERE b.id = i.id),
                    i.expires_at <= i.leased_at + make_interval(secs => j.lease_timeout)
                    AND i.leased_at < shardline_now() - make_interval(secs => %(since)s))
 RETURNING i.id
), counted AS (
    SELECT count(*) AS expired FROM gone
)
-- Wakes as many waiting takes as leases expired (server/waiting.py): their
-- take reclaims the lease and leases the item.
SELECT expired,
       CASE WHEN expired > 0 THEN pg_notify('shardline_job', %(job)s::text || ':pending:' || expired)::text END
           AS notified
  FROM counted;

"""Random interleavings of take / complete / fail / extend / expiry / snapshot / restore, on real Postgres.

A hypothesis state machine drives the service functions (the SQL the API
runs), and sets leases' expires_at into the past (test set-up through SQL,
as time passing would). Before each call it reads the rows it is about to
touch; after it, it checks:
- a completion, failure or heartbeat is accepted exactly when its token is
  the item's current one on a leased row: a stale token never is;
- never two live leases on an item: every token handed out belongs to one
  item, and a leased row's token is the newest one handed out for it;
- the counters (watermarks) equal a direct GROUP BY count of the rows.
"""

import uuid

import pytest
from django.db import connection
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from server import progress
from server.errors import InvalidTransition, LeaseLost
from server.models import Job
from server.services import heartbeats, jobs, leases, snapshots
from worker_sdk.protocol import Completion, TakeRequest

pytestmark = pytest.mark.django_db

ITEMS, EPOCHS = 5, 2


def rows(job_id, ids=None):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, state, token, coalesce(expires_at < now(), false) FROM shardline_item WHERE job_id = %s"
            + (" AND id = ANY(%s)" if ids is not None else ""),
            [job_id] + ([list(ids)] if ids is not None else []),
        )
        return {row[0]: row[1:] for row in cursor.fetchall()}


def live(row, token):
    """The current lease: its completion (or failure, or heartbeat) must be accepted."""
    return row is not None and row[0] == "leased" and row[1] == token


def repeat(row, token):
    """A retried completion of the accepted one: answered as accepted, changes nothing."""
    return row is not None and row[0] == "done" and row[1] == token


class LeaseMachine(RuleBasedStateMachine):
    @initialize()
    def create(self):
        spec = jobs.JobSpec(
            name=f"prop-{uuid.uuid4().hex[:10]}",
            works=[f"/p/{i}" for i in range(ITEMS)],
            num_epochs=EPOCHS,
            shuffle=False,
            lease_timeout=60.0,
            max_attempts=3,
        )
        self.job_id = jobs.create_or_attach(spec)[0].pk
        self.issued = {}  # token -> item id: every lease ever handed out
        self.newest = {}  # item id -> newest token handed out
        self.snapshots = []

    # -- what a client can send: any token ever issued, current or stale ----------
    def pairs(self, data, limit=4):
        if not self.issued:
            return []
        # In the order they were issued: fencing tokens are random, so their
        # sorted order differs between runs of the same steps, and Hypothesis
        # could not replay a case (FlakyStrategyDefinition).
        tokens = data.draw(st.lists(st.sampled_from(list(self.issued)), max_size=limit, unique=True))
        seen, pairs = set(), []
        for token in tokens:
            item = self.issued[token]
            if item not in seen:
                seen.add(item)
                pairs.append((item, token))
        return pairs

    def record(self, result_leases):
        for lease in result_leases:
            assert lease.token not in self.issued, "a token was handed out twice"
            self.issued[lease.token] = lease.id
            self.newest[lease.id] = lease.token

    @rule(data=st.data(), worker=st.sampled_from(["w0", "w1", "w2"]), count=st.integers(1, 3))
    def take(self, data, worker, count):
        pairs = self.pairs(data)
        before = rows(self.job_id, [i for i, _ in pairs])
        result = leases.take(
            self.job_id, TakeRequest(worker, count=count, complete=tuple([Completion(i, t) for i, t in pairs]))
        )
        # A lease that expired but was not taken back yet may go either way
        # in a take: the take reclaims expired leases in the same statement.
        must = {i for i, t in pairs if (live(before.get(i), t) and not before[i][2]) or repeat(before.get(i), t)}
        may = must | {i for i, t in pairs if live(before.get(i), t)}
        assert must <= set(result.completed) <= may, (result.completed, must, may, pairs, before)
        assert set(result.lost) == {i for i, _ in pairs} - set(result.completed)
        self.record(result.leases)

    @rule(data=st.data())
    def complete(self, data):
        for item, token in self.pairs(data, 1):
            row = rows(self.job_id, [item]).get(item)
            ok = live(row, token) or repeat(row, token)
            try:
                leases.complete(item, token)
                assert ok, f"stale token {token} completed item {item}"
            except LeaseLost:
                assert not ok, f"current token {token} of item {item} was refused"

    @rule(data=st.data())
    def fail(self, data):
        for item, token in self.pairs(data, 1):
            ok = live(rows(self.job_id, [item]).get(item), token)
            try:
                leases.fail(item, token, "property test")
                assert ok, f"stale token {token} failed item {item}"
            except LeaseLost:
                assert not ok

    @rule(data=st.data())
    def extend(self, data):
        pairs = self.pairs(data)
        before = rows(self.job_id, [i for i, _ in pairs])
        beat = heartbeats.extend(pairs)
        extended, lost = beat.extended, beat.lost
        assert set(extended) == {i for i, t in pairs if live(before.get(i), t)}
        # A heartbeat for a lease completed with that token (one that waited
        # on the server while its lease was completed) is not lost.
        assert set(lost) == {i for i, t in pairs if not live(before.get(i), t) and not repeat(before.get(i), t)}

    @rule(data=st.data())
    def expire(self, data):
        leased = sorted(i for i, row in rows(self.job_id).items() if row[0] == "leased")
        if leased:
            item = data.draw(st.sampled_from(leased))
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE shardline_item SET expires_at = now() - interval '1 second' WHERE id = %s", [item]
                )

    @rule(worker=st.sampled_from(["w0", "w1"]))
    def snapshot(self, worker):
        self.snapshots.append(snapshots.take(self.job_id, worker).id)

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def restore(self, data):
        try:
            snapshots.restore(self.job_id, data.draw(st.sampled_from(self.snapshots)), generation=uuid.uuid4().hex)
        except InvalidTransition:
            pass  # e.g. a job whose items all failed cannot be restored: that is a refusal, not a change

    @invariant()
    def one_live_lease_per_item_and_the_newest_token(self):
        if not hasattr(self, "job_id"):
            return
        for item, (state, token, _expired) in rows(self.job_id).items():
            if state == "leased":
                assert token == self.newest.get(item), (item, token, self.newest.get(item))
                assert self.issued[token] == item

    @invariant()
    def counters_equal_a_direct_count(self):
        if not hasattr(self, "job_id"):
            return
        job = Job.objects.get(pk=self.job_id)
        with connection.cursor() as cursor:
            # An expired lease is pending to every reader (server/progress.py).
            cursor.execute(
                """
                SELECT epoch, CASE WHEN state = 'leased' AND expires_at < now() THEN 'pending' ELSE state END, count(*)
                  FROM shardline_item WHERE job_id = %s GROUP BY 1, 2
                """,
                [self.job_id],
            )
            direct = {(epoch, state): n for epoch, state, n in cursor.fetchall()}
        for row in progress.of(job).epochs:
            if row.materialised:
                for state in ("pending", "leased", "done", "failed"):
                    assert getattr(row, state) == direct.get((row.epoch, state), 0), (row, state, direct)


def test_random_lease_interleavings_keep_the_invariants():
    run_state_machine_as_test(
        LeaseMachine,
        settings=settings(
            max_examples=40, stateful_step_count=30, deadline=None, suppress_health_check=list(HealthCheck)
        ),
    )

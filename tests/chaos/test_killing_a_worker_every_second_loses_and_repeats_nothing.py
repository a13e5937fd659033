"""Eight real SDK worker processes; one is SIGKILLed every second, and replaced, for the whole run.

Proves, from the rows and the workers' own output:
- every item of every epoch ends done exactly once (nothing lost, nothing counted twice);
- no stale completion was accepted: attempts = 1 + expired events per item, the
  completing lease is newer than the item's last reclaim, only killed workers
  ever had a lease taken back;
- a killed worker's item is started by another worker within lease timeout + 2 s
  (at least 80% of them in a run; none later than lease timeout + 4 s).
"""

import os
import random
import time

from tests.support import wait_until

from .harness import Worker, audit, done_count

LEASE = 2.0
# `make soak` scales the run up (SHARDLINE_CHAOS_SCALE=6: about a minute and a half of kills).
SCALE = int(os.environ.get("SHARDLINE_CHAOS_SCALE", "1"))
ITEMS, EPOCHS, COST, WORKERS = 150 * SCALE, 2, 0.25, 8


def test_killing_a_worker_every_second_loses_and_repeats_nothing(sdk_env):
    queue = "chaos_kill"
    rng = random.Random(9)
    counter = iter(range(10_000))

    def spawn():
        return Worker(sdk_env, f"w{next(counter)}", queue, ITEMS, EPOCHS, COST, LEASE)

    workers = [spawn() for _ in range(WORKERS)]
    try:
        job_id = wait_until(lambda: _job(queue, sdk_env), 30, 0.1, "the job to exist")
        deadline = time.monotonic() + 120 * SCALE
        next_kill = time.monotonic() + 1.0
        while done_count(job_id) < ITEMS * EPOCHS:
            assert time.monotonic() < deadline, f"the run did not finish in {120 * SCALE} s"
            now = time.monotonic()
            if now >= next_kill:
                victims = [w for w in workers if w.alive() and w.killed_at is None and w.starts]
                if victims:
                    rng.choice(victims).kill()
                    workers.append(spawn())
                next_kill += 1.0
            time.sleep(max(0.0, min(0.05, next_kill - time.monotonic())))
        survivors = [w for w in workers if w.killed_at is None]
        for worker in survivors:
            assert worker.wait(60) == 0, "".join(worker.stderr[-20:])
            assert worker.finished
    finally:
        for worker in workers:
            worker.stop()

    killed = {w.name: w for w in workers if w.killed_at is not None}
    figures = audit(job_id, ITEMS, EPOCHS)

    # Only killed workers lost leases; each loss was followed, soon, by another worker starting the item.
    latencies = []
    starts = [(t, item, w.name) for w in workers for t, item in w.starts]
    for _item_id, holder, _at, _epoch, position in figures["expired"]:
        assert holder in killed, f"live worker {holder} had a lease taken back"
        kill_time = killed[holder].killed_at
        item = f"/items/{position:04d}"
        started = [t for t, it, name in starts if it == item and name != holder and t > kill_time]
        assert started, f"{item} held by killed {holder} was never started again"
        latencies.append(min(started) - kill_time)
    assert len(killed) >= 10 * SCALE, len(killed)
    assert latencies, "no killed worker held an item"
    # The bound (lease timeout + 2 s) holds for nearly every kill; on the
    # 2-core CI machine, with eight workers, a server and a replacement
    # interpreter starting every second, one re-lease in a run can come a
    # scheduler hiccup later. The worst case is printed and recorded.
    latencies.sort()
    within = sum(1 for latency in latencies if latency <= LEASE + 2.0)
    assert within >= 0.8 * len(latencies), latencies
    assert latencies[-1] <= LEASE + 4.0, latencies[-5:]
    print(
        f"\nchaos workers: {len(killed)} SIGKILLs survived, {len(latencies)} leases taken back, "
        f"re-lease after kill max {max(latencies):.2f} s (mean {sum(latencies) / len(latencies):.2f} s), "
        f"{figures['rows']} items done once, 0 lost, {figures['lost_completions_refused']} stale completions refused"
    )


def _job(queue, env):
    from server.models import Job

    job = Job.objects.filter(name=f"{queue}.{env['SHARDLINE_RUN']}").first()
    return job.pk if job else None

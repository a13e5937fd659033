"""A loop whose queue is restored while it reads goes on from the snapshot's position, in order.

With a look-ahead, a take ahead may be on its way while the restore runs.
What it brings is from before the restore (stale) and is given back; but
when it arrived after the restore it held items the restore re-opened, and
a take ahead made while they were still held leased the items after them:
the loop read those first (``/r/4, /r/1, /r/2, /r/3``: a TF1 Saver restore
in CI). The look-ahead now takes nothing while stale leases are held, and
the consumer's own take waits for a take ahead still out.
"""

import pytest

ROUNDS = 40


@pytest.mark.timeout(180)
@pytest.mark.parametrize("look_ahead", [None, 4], ids=["depth-follows-the-loop", "depth-4"])
def test_every_restore_mid_loop_reads_again_from_the_snapshot_in_order(sdk_env, look_ahead):
    from worker_sdk import WorkQueue

    queue = WorkQueue([f"/r/{i}" for i in range(12)], shuffle=False, name="restore_in_order", look_ahead=look_ahead)
    loop = queue.items()
    assert [next(loop) for _ in range(2)] == ["/r/0", "/r/1"]
    snapshot = queue.snapshot()  # /r/1 in hand: read again after each restore
    out_of_order = []
    for round_ in range(ROUNDS):
        read = 2 + round_ % 4
        assert len([next(loop) for _ in range(read)]) == read
        queue.restore(snapshot["id"], generation=f"round-{round_}")
        again = [next(loop) for _ in range(read + 1)]
        if again != [f"/r/{i}" for i in range(1, read + 2)]:
            out_of_order.append((round_, again))
    assert out_of_order == []
    # Read to the end: nothing lost, nothing left held by a stale lease.
    assert list(loop) == [f"/r/{i}" for i in range(read + 2, 12)]
    marks = queue.watermarks()
    assert (marks["done"], marks["leased"], marks["pending"]) == (12, 0, 0)

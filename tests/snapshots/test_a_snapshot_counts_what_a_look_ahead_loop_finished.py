"""A snapshot counts every item the loop has finished, when the next item was leased ahead.

With ``WorkQueue(look_ahead=1)`` the loop's finished item is acknowledged by
the take ahead that leases the item after next, on another thread. A
snapshot taken as the loop starts an item (a TF1 saver hook's after_run, a
torch state_dict) raced that take: when it won, the item the loop had just
finished was not done at the snapshot, and a restore made the loop read it
again (a restored TF1 MonitoredTrainingSession read one item more than it
should). ``snapshot()`` now acknowledges what the process's consumers
finished, and waits for the acknowledgements other requests carry.
"""

import pytest

from server.models import Item

ITEMS = 24


@pytest.mark.timeout(120)
def test_every_snapshot_counts_the_items_the_loop_finished(sdk_env):
    from worker_sdk import WorkQueue

    queue = WorkQueue([f"/ahead/{i}" for i in range(ITEMS)], shuffle=False, name="snapshot_ahead", look_ahead=1)
    counted = []
    for started, item in enumerate(queue.items()):
        assert item == f"/ahead/{started}"
        seq = queue.snapshot()["seq"] or 0
        counted.append(Item.objects.filter(job_id=queue.job["id"], seq__isnull=False, seq__lte=seq).count())
    # Item n starts when items 0..n-1 are finished: the snapshot taken then counts n.
    assert counted == list(range(ITEMS))
    assert queue.watermarks()["done"] == ITEMS

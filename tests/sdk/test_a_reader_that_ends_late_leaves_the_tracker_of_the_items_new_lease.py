"""A reader that ends after its item was leased again here keeps its hands off the new lease's tracker.

A lease id is its item's: when a lease is lost while its reader still runs
(it expired behind a stalled process, a restore fenced it), the item may be
leased again by the same process under a newer token, and a second reader
(another slot of an interleaved dataset, another stream) reads it with a
tracker of its own. The first reader's end used to drop whatever tracker
the id had: the new reader's position then went unreported and a split
asked of it found nothing to cut.
"""

import dataclasses

from worker_sdk import WorkQueue, lease_records


def test_untracking_an_older_lease_leaves_the_tracker_of_its_item_leased_again(sdk_env, tmp_path):
    path = tmp_path / "part.csv"
    path.write_text("".join(f"{i}\n" for i in range(100)))
    queue = WorkQueue([f"{path}?start=0&end=100"], shuffle=False)
    first_reader = queue.consumers.stream(tracks=True)
    lease = first_reader.next()
    assert (lease.start, lease.end) == (0, 100)
    old_tracker = first_reader.track(lease)
    assert lease_records.claimer(first_reader, old_tracker)(0)

    # The same item, leased again under a newer token and read by a second reader.
    again = dataclasses.replace(lease, token=lease.token + 1)
    second_reader = queue.consumers.stream(tracks=True)
    new_tracker = second_reader.track(again)
    claim = lease_records.claimer(second_reader, new_tracker)
    assert claim(0) and claim(1)

    first_reader.untrack(lease, old_tracker)  # the first reader ends late
    leaser = first_reader.leaser()
    assert leaser.held.tracker(lease.id) is new_tracker
    assert leaser.held.reads_ranges()

    second_reader.untrack(again, new_tracker)
    assert leaser.held.tracker(lease.id) is None and not leaser.held.reads_ranges()
    first_reader.abort("the test is over")
    queue.close()

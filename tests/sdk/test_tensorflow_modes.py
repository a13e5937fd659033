"""take / input_dataset / input_producer / add_summary in eager, tf.function and TF1 graph mode."""

import textwrap

import pytest

from .conftest import run_python

pytestmark = pytest.mark.tf


def test_eager_take_returns_scalar_strings_then_out_of_range(sdk_env):
    import tensorflow as tf

    from worker_sdk import WorkQueue

    queue = WorkQueue(["/a", "/b"], shuffle=False, name="eager_take")
    first, second = queue.take(), queue.take()
    assert first.shape == () and first.dtype == tf.string
    assert [first.numpy(), second.numpy()] == [b"/a", b"/b"]
    with pytest.raises(tf.errors.OutOfRangeError, match="All works in work queue eager_take are taken."):
        queue.take()
    assert queue.watermarks()["done"] == 2


def test_eager_take_with_a_look_ahead_leases_the_next_item_while_the_step_runs(sdk_env):
    import tensorflow as tf

    from tests.support import wait_until
    from worker_sdk import WorkQueue

    queue = WorkQueue(["/a", "/b", "/c", "/d"], shuffle=False, name="eager_ahead", look_ahead=1)
    taken = [queue.take().numpy(), queue.take().numpy()]
    # From its second item on (its pace known), the next is leased ahead.
    marks = lambda: (queue.watermarks()["done"], queue.watermarks()["leased"])  # noqa: E731
    wait_until(lambda: marks() == (1, 2), 10, 0.02, "/c leased ahead while /b is in hand")
    taken += [queue.take().numpy(), queue.take().numpy()]
    with pytest.raises(tf.errors.OutOfRangeError, match="All works in work queue eager_ahead are taken."):
        queue.take()
    assert taken == [b"/a", b"/b", b"/c", b"/d"]
    assert marks() == (4, 0)


def test_a_closed_queue_gives_back_what_take_leased_ahead(sdk_env):
    from server.models import Event
    from tests.support import wait_until
    from worker_sdk import WorkQueue
    from worker_sdk.look_ahead import STOPPED_REASON

    queue = WorkQueue(["/a", "/b", "/c"], shuffle=False, name="eager_ahead_closed", look_ahead=1)
    assert [queue.take().numpy(), queue.take().numpy()] == [b"/a", b"/b"]
    wait_until(lambda: queue.watermarks()["leased"] == 2, 10, 0.02, "/c leased ahead")
    queue.close()
    marks = queue.watermarks()
    # /b, in hand, is left to its lease, as without a look-ahead; /c goes back unread.
    assert (marks["done"], marks["leased"], marks["pending"]) == (1, 1, 1)
    released = Event.objects.filter(job_id=queue.job["id"], kind="released").values_list("message", flat=True)
    assert list(released) == [STOPPED_REASON]


def test_input_dataset_works_inside_tf_function(sdk_env, csv_files):
    import tensorflow as tf

    from worker_sdk import WorkQueue

    queue = WorkQueue(csv_files, name="in_function")
    dataset = tf.data.TextLineDataset(queue.input_dataset())

    @tf.function
    def count_lines(ds):
        total = tf.constant(0)
        for _line in ds:
            total += 1
        return total

    assert int(count_lines(dataset)) == 40
    assert queue.watermarks()["done"] == 4


def test_eager_add_summary_writes_watermark_scalars(sdk_env, tmp_path):
    import tensorflow as tf

    from worker_sdk import WorkQueue

    queue = WorkQueue(["/a", "/b", "/c"], name="summaries")
    next(queue.items())
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default(step=5):
        queue.add_summary()
    writer.flush()
    tags = set()
    for event_file in tmp_path.iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(event_file)):
            tags |= {value.tag for value in event.summary.value}
    assert {"summaries/fraction_of_3_full", "summaries/done", "summaries/leased", "summaries/pending"} <= tags


GRAPH_SCRIPT = textwrap.dedent(
    """
    import sys
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    from worker_sdk import WorkQueue

    files = sys.argv[1:]
    take_queue = WorkQueue(["/x", "/y"], shuffle=False, name="graph_take")
    item = take_queue.take()
    ahead_queue = WorkQueue(["/p", "/q", "/r"], shuffle=False, name="graph_take_ahead", look_ahead=1)
    ahead_item = ahead_queue.take()
    data_queue = WorkQueue(files, name="graph_dataset")
    line = tf.data.make_one_shot_iterator(tf.data.TextLineDataset(data_queue.input_dataset())).get_next()
    blocks_queue = WorkQueue(files, shuffle=False, name="graph_blocks")
    blocks = blocks_queue.dataset(cycle_length=2, hand_over_seconds=0.01)
    block_line = tf.data.make_one_shot_iterator(blocks).get_next()
    data_queue.add_summary()
    summary = tf.summary.merge_all()
    with tf.Session() as sess:
        print("take", sess.run(item).decode(), sess.run(item).decode())
        try:
            sess.run(item)
        except tf.errors.OutOfRangeError as exc:
            print("end", "All works in work queue graph_take are taken." in exc.message)
        print("ahead", *(sess.run(ahead_item).decode() for _ in range(3)))
        try:
            sess.run(ahead_item)
        except tf.errors.OutOfRangeError as exc:
            print("ahead end", "All works in work queue graph_take_ahead are taken." in exc.message)
        print("ahead done", ahead_queue.watermarks()["done"])
    count = 0
    with tf.train.MonitoredTrainingSession() as sess:
        while not sess.should_stop():
            sess.run(line)
            count += 1
    print("lines", count)
    count = 0
    with tf.train.MonitoredTrainingSession() as sess:
        while not sess.should_stop():
            sess.run(block_line)
            count += 1
    print("block lines", count, "done", blocks_queue.watermarks()["done"])
    with tf.Session() as sess:
        parsed = tf.Summary.FromString(sess.run(summary))
        print("summary", sorted((v.tag, v.simple_value) for v in parsed.value))
    """
)


def test_graph_mode_take_and_dataset_under_monitored_training_session(sdk_env, csv_files, tmp_path):
    script = tmp_path / "graph.py"
    script.write_text(GRAPH_SCRIPT)
    result = run_python([str(script), *csv_files], sdk_env)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "take /x /y" in lines and "end True" in lines and "lines 40" in lines
    assert "block lines 40 done 4" in lines  # dataset(hand_over_seconds=...) in a graph
    assert "ahead /p /q /r" in lines and "ahead end True" in lines and "ahead done 3" in lines
    # Four files read: nothing pending, four done (items per epoch: 4).
    assert (
        "summary [('graph_dataset/done', 4.0), ('graph_dataset/fraction_of_4_full', 0.0), "
        "('graph_dataset/leased', 0.0), ('graph_dataset/pending', 0.0)]" in lines
    )


def test_the_sdks_datasets_run_without_autotuning_unless_the_user_turns_it_back_on(sdk_env, csv_files):
    # At the end of the data TensorFlow joined tf.data's autotuning thread,
    # asleep between its rounds: a loop's OutOfRange came 3-15 s after the
    # job ended (bench/shapes.py measures that; this holds the setting).
    import tensorflow as tf

    from worker_sdk import WorkQueue

    queue = WorkQueue(csv_files, shuffle=False, name="no_autotune")
    interleaved = queue.dataset(cycle_length=2)
    assert interleaved.options().autotune.enabled is False
    assert queue.input_dataset().options().autotune.enabled is False
    in_blocks = queue.dataset(cycle_length=2, hand_over_seconds=0.01).options()
    assert in_blocks.autotune.enabled is False and in_blocks.experimental_optimization.inject_prefetch is False

    # AUTOTUNE in the user's own steps still works.
    pipeline = interleaved.map(lambda line: tf.strings.length(line), num_parallel_calls=tf.data.AUTOTUNE)
    pipeline = pipeline.prefetch(tf.data.AUTOTUNE)
    assert pipeline.options().autotune.enabled is False
    assert len(list(pipeline.as_numpy_iterator())) == 40
    assert queue.watermarks()["done"] == 4
    # The user's own options, set later, take precedence.
    options = tf.data.Options()
    options.autotune.enabled = True
    assert pipeline.with_options(options).options().autotune.enabled is True

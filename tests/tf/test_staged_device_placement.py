"""With a GPU visible the buffer and the staged outputs are placed on it; otherwise they stay put."""

import pytest
import tensorflow as tf

from worker_sdk.tf.staging import staged

pytestmark = pytest.mark.tf


@pytest.fixture
def visible_gpu(monkeypatch):
    """Makes TensorFlow report one GPU; graphs are only built, never run on it."""
    real = tf.config.list_physical_devices

    def list_physical_devices(device_type=None):
        if device_type == "GPU":
            return [tf.config.PhysicalDevice(name="/physical_device:GPU:0", device_type="GPU")]
        return real(device_type)

    monkeypatch.setattr(tf.config, "list_physical_devices", list_physical_devices)


def device_of(graph, op_name):
    return tf.DeviceSpec.from_string(graph.get_operation_by_name(op_name).device)


def test_the_buffer_and_the_outputs_live_on_the_visible_gpu(visible_gpu):
    graph = tf.Graph()
    with graph.as_default():
        out = staged({"dense": tf.ones([2, 3]), "label": tf.constant("x")})

    for op_name in ("staged/buffer", "staged/put", "staged/take"):
        assert device_of(graph, op_name).device_type == "GPU", op_name
    assert tf.DeviceSpec.from_string(out["dense"].device).device_type == "GPU"
    # Strings have no device memory representation; they stay on the host.
    assert tf.DeviceSpec.from_string(out["label"].device).device_type == "CPU"
    # The hook check is host-side bookkeeping.
    assert device_of(graph, "staged/require_prefetch_hook/Assert").device_type == "CPU"


def test_an_explicit_device_scope_wins_over_the_gpu(visible_gpu):
    graph = tf.Graph()
    with graph.as_default(), tf.device("/device:CPU:0"):
        staged(tf.ones([2]))

    assert device_of(graph, "staged/buffer").device_type == "CPU"


def test_without_a_gpu_the_buffer_is_left_to_the_placer():
    assert not tf.config.list_physical_devices("GPU")
    graph = tf.Graph()
    with graph.as_default():
        staged(tf.ones([2]))

    assert graph.get_operation_by_name("staged/buffer").device == ""


def test_a_dataset_with_string_components_is_prefetched_in_host_memory(visible_gpu):
    iterator = staged(tf.data.Dataset.from_tensor_slices(["a", "b", "c"]), capacity=2)

    assert [x.numpy() for x in iterator] == [b"a", b"b", b"c"]

"""Eager mode and ``tf.function``: a staged ``tf.data`` source is a prefetching iterator."""

from __future__ import annotations

import logging

import tensorflow as tf

from .errors import bridged_exception, describe, error_code
from .graph import visible_gpu

logger = logging.getLogger(__name__)


def is_dataset_source(features):
    return isinstance(features, (tf.data.Dataset, tf.data.Iterator))


def _device_dataset(spec):
    """The GPU to prefetch to, when every component can live there.

    ``copy_to_device`` cannot move string or composite components to a GPU,
    so those datasets are prefetched in host memory.
    """
    gpu = visible_gpu()
    if gpu is None:
        return None
    for leaf in tf.nest.flatten(spec):
        if not isinstance(leaf, tf.TensorSpec) or leaf.dtype in (tf.string, tf.resource, tf.variant):
            logger.info("staged: element has components that cannot live on %s; prefetching in host memory", gpu)
            return None
    return gpu


def staged_dataset(source, capacity, closed, ignored, name):
    spec = source.element_spec
    stage_name = name or "staged"
    native = (
        isinstance(source, tf.data.Dataset)
        and closed.codes == {tf.errors.OUT_OF_RANGE}
        and not closed.classes
        and not ignored
    )
    if native:
        # tf.data's own semantics already are the default ones: OutOfRange
        # ends the iteration and every other error is raised by next().
        dataset = source
    else:
        dataset = tf.data.Dataset.from_generator(
            lambda: _classified(source, closed, ignored, stage_name), output_signature=spec
        )
    gpu = _device_dataset(spec)
    if gpu is None:
        return iter(dataset.prefetch(capacity))
    # copy_to_device then prefetch placed on the GPU: the copy happens once per
    # element, ahead of the take, and the iterator must live on that device.
    dataset = dataset.apply(tf.data.experimental.copy_to_device(gpu))
    with tf.device(gpu):
        return iter(dataset.prefetch(capacity))


def _classified(source, closed, ignored, stage_name):
    """Elements of ``source`` with closed / ignored errors applied (a generator).

    Runs inside ``from_generator``, i.e. eagerly, so errors can be classified
    by code; only needed when the caller's exception types differ from
    tf.data's own semantics or when ``source`` is an iterator.
    """
    iterator = iter(source) if isinstance(source, tf.data.Dataset) else source
    while True:
        try:
            element = next(iterator)
        except StopIteration:
            if tf.errors.OUT_OF_RANGE in closed.codes:
                return
            raise bridged_exception(
                tf.errors.UNKNOWN,
                f"staged '{stage_name}': input ended (OutOfRangeError), which is not a closed exception type here",
            ) from None
        except Exception as exc:  # noqa: BLE001 - classified below
            if closed.matches(exc):
                return
            if ignored.matches(exc):
                logger.warning("staged %r: skipped an element: %s", stage_name, describe(exc))
                continue
            raise bridged_exception(
                error_code(exc), f"staged '{stage_name}': input failed with {describe(exc)}"
            ) from exc
        yield element

"""``dataset(hand_over_seconds=...)``'s records handed to TensorFlow as blocks: arrays stacked here, unbatched inside it.

The blocks' sizes are worker_sdk.hand_over's. Each block is stacked into one
array per component of the records' ``output_signature`` before it is
handed over, so that a record that does not match it ends the loop with an
error that names it, after the records before it were delivered; tf.data's
own conversion of a whole block failed the block, those records with it.
"""

from __future__ import annotations

from contextlib import closing
from typing import Callable, Iterator

import numpy as np

from .. import hand_over
from ._require import require

tf = require("WorkQueue.dataset(hand_over_seconds=...)")


def in_blocks(records: Callable[[hand_over.Blocks], Iterator[list]], signature, seconds: float):
    """A dataset of ``records(sizer)``'s lists of records, unbatched: records of ``signature``, one by one."""
    hand_over.Blocks(seconds)  # a bad time is an error now, before anything is leased
    specs = tf.nest.flatten(signature)
    for spec in specs:
        if not isinstance(spec, tf.TensorSpec) or not spec.shape.is_fully_defined():
            raise ValueError(
                "hand_over_seconds needs records of fixed shapes (tf.TensorSpec with every dimension known), "
                f"to stack them into blocks; not {spec}"
            )
    stacked = tf.nest.map_structure(lambda spec: tf.TensorSpec([None, *spec.shape], spec.dtype), signature)

    def blocks():
        with closing(records(hand_over.Blocks(seconds))) as lists:
            for block in lists:
                try:
                    yield _stack(signature, specs, block)
                except (ValueError, TypeError, KeyError, IndexError):
                    index, why = _first_bad(signature, specs, block)
                    if 0 < index < len(block):
                        yield _stack(signature, specs, block[:index])
                    raise ValueError(
                        f"dataset(): a record does not match output_signature {signature}: {why}"
                    ) from None

    return tf.data.Dataset.from_generator(blocks, output_signature=stacked).unbatch()


def _stack(signature, specs: list, block: list):
    """``block`` as one array per component, each of shape [records, *the spec's shape], in ``signature``'s structure."""
    if isinstance(signature, tf.TensorSpec):
        columns = [block]
    else:
        columns = list(zip(*(_components(signature, record) for record in block)))
    arrays = []
    for spec, column in zip(specs, columns):
        array = np.asarray(column, dtype=spec.dtype.as_numpy_dtype)
        if array.shape[1:] != tuple(spec.shape):
            raise ValueError(f"a record of shape {array.shape[1:]} where {spec.shape} was expected")
        if spec.dtype == tf.string and not all(isinstance(value, (bytes, str)) for value in array.flat):
            raise TypeError("a string component that is not bytes or str")
        arrays.append(array)
    return tf.nest.pack_sequence_as(signature, arrays)


def _first_bad(signature, specs: list, block: list) -> tuple[int, BaseException]:
    """The index of ``block``'s first record that does not stack, and why."""
    for index, record in enumerate(block):
        try:
            _stack(signature, specs, [record])
        except (ValueError, TypeError, KeyError, IndexError) as why:
            return index, why
    return len(block), ValueError("the records do not stack together")


def _components(signature, record) -> list:
    """``record``'s values, one per TensorSpec of ``signature``, in tf.nest's order (a dict's keys sorted)."""
    if isinstance(signature, tf.TensorSpec):
        return [record]
    if isinstance(signature, dict):
        return [value for key in sorted(signature) for value in _components(signature[key], record[key])]
    if len(record) != len(signature):
        raise ValueError(f"a record of {len(record)} values where {len(signature)} were expected")
    return [value for spec, part in zip(signature, record) for value in _components(spec, part)]

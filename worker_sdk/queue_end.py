"""When a consumer's queue has ended: the rule, and what the consumer is told.

A take that leased nothing ends its consumer's queue when the job is
exhausted, or when nothing left is worth waiting for (``queue_ended``). The
consumer then gets ``QueueExhausted`` (TensorFlow paths: OutOfRangeError).
"""

from __future__ import annotations

from . import errors
from .protocol import TakeAnswer


class QueueExhausted(errors.ShardlineError):
    """Every item of the queue has been taken (TensorFlow paths raise OutOfRangeError instead)."""


def exhausted_message(name: str) -> str:
    return f"All works in work queue {name} are taken."


def queue_ended(answer: TakeAnswer, known: int) -> bool:
    """The end-of-queue rule, for a take that leased nothing.

    The queue has ended for a consumer when the job is exhausted, or when no
    lease left is worth waiting for (the rest is this consumer's own, or held
    by consumers at their end too, which may be waiting on this one) and the
    server counts no lease under this worker's name that the process does not
    know of (a take whose answer was lost: it is waited out, so that its
    expiry hands the item to a worker).
    """
    if answer.exhausted:
        return True
    if answer.waiting_on is None:  # items pending, an epoch being created, a pause: not an end
        return False
    return answer.waiting_on == 0 and (answer.leased_by_you or 0) <= known

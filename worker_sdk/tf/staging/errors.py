"""Exception classification for staged buffers: which errors end a producer, skip an element, or fail.

Also how an error crosses back into TensorFlow: a Python exception escaping a
``py_function`` or a ``from_generator`` generator keeps its code only for a
few classes (``bridged_exception``).
"""

from __future__ import annotations

import re

import tensorflow as tf

_ERROR_CODES = frozenset(
    getattr(tf.errors, code_name) for code_name in dir(tf.errors) if code_name.isupper() and code_name != "OK"
)


class ExceptionTypes:
    """A set of exception types given as TF error codes or exception classes."""

    def __init__(self, types_, argument):
        codes = set()
        classes = []
        for item in types_:
            if isinstance(item, bool):
                raise TypeError(f"{argument}: {item!r} is neither an error code nor an exception class")
            if isinstance(item, int):
                if item not in _ERROR_CODES:
                    raise ValueError(f"{argument}: {item} is not a tf.errors error code")
                codes.add(item)
            elif isinstance(item, type) and issubclass(item, BaseException):
                if issubclass(item, tf.errors.OpError) and item is not tf.errors.OpError:
                    codes.add(tf.compat.v1.errors.error_code_from_exception_type(item))
                else:
                    classes.append(item)
            else:
                raise TypeError(f"{argument}: {item!r} is neither an error code nor an exception class")
        self.codes = frozenset(codes)
        self.classes = tuple(classes)

    def __bool__(self):
        return bool(self.codes or self.classes)

    def matches(self, exc):
        if isinstance(exc, tf.errors.OpError) and exc.error_code in self.codes:
            return True
        return isinstance(exc, self.classes)

    def overlaps(self, other):
        return bool(self.codes & other.codes) or bool(set(self.classes) & set(other.classes))


# Errors raised inside tf.data functions start with "{{function_node ...}} ".
_FUNCTION_NODE_PREFIX = re.compile(r"^(\{\{[^}]*\}\}\s*)+")
# Lines Session.run adds around the cause of an error: a header, where the
# failing node was defined, and node tags.
_ERROR_CONTEXT_LINE = re.compile(r"^(Graph execution error:|Detected at node .*|File \".*|Node: '.*'|\[\[.*\]\])$")


def describe(exc):
    """One line naming an exception: ``ClassName: first line of its message``."""
    if isinstance(exc, tf.errors.OpError):
        text = exc.message
    else:
        text = str(exc)
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not _ERROR_CONTEXT_LINE.match(line)]
    first = _FUNCTION_NODE_PREFIX.sub("", lines[0]) if lines else ""
    return f"{type(exc).__name__}: {first}".rstrip(": ")


def error_code(exc):
    return exc.error_code if isinstance(exc, tf.errors.OpError) else tf.errors.UNKNOWN


def bridged_exception(code, message):
    """The Python exception to raise inside a py_function / generator.

    TensorFlow maps a Python exception escaping a py_function to a status by
    its Python class only (an ``OpError`` becomes ``UNKNOWN``).  These are the
    classes that come out with the original code.  ``OUT_OF_RANGE`` is
    deliberately not bridged: a producer's OutOfRange reaches here only when
    the caller excluded it from ``closed_exception_types``, and re-raising it as
    OutOfRange would make ``MonitoredSession`` treat it as a clean end of data.
    """
    if code == tf.errors.INVALID_ARGUMENT:
        return ValueError(message)
    if code == tf.errors.RESOURCE_EXHAUSTED:
        return MemoryError(message)
    if code == tf.errors.UNIMPLEMENTED:
        return NotImplementedError(message)
    return RuntimeError(message)


def raise_producer_error(code, message):
    raise bridged_exception(int(code.numpy()), message.numpy().decode("utf-8", "replace"))

"""JSON parsing that rejects what would otherwise surface as a 500 later."""

import json
import math
import re

from django.conf import settings
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import JSONParser

from .. import body_limits

# A lone UTF-16 surrogate can only come from a \uD800-\uDFFF escape (the body
# itself is strict UTF-8). JSON accepts one unpaired; no encoder, Postgres
# included, can store it. Seeing no such escape, no string needs checking:
# a million-work body costs one regex scan, not a walk.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
SURROGATE = re.compile("[\ud800-\udfff]")
JSON_WHITESPACE = " \t\n\r"


class BodyTooLarge(APIException):
    status_code = 413
    default_code = "too_large"


class StrictJSONParser(JSONParser):
    """Bounded size, UTF-8 only, text only (no lone surrogates), no NaN/Infinity, bounded nesting."""

    max_depth = 32

    def parse(self, stream, media_type=None, parser_context=None):
        request = (parser_context or {}).get("request")
        limit = (
            body_limits.limit(request.method, request.path)
            if request is not None
            else settings.SHARDLINE_MAX_BODY_BYTES
        )
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise BodyTooLarge(body_limits.message(limit))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"request body is not UTF-8: {exc.reason} at byte {exc.start}") from None
        del raw  # a large body is held once, not twice, while it is parsed
        if not text:
            return {}  # no body: every field takes its default
        # Whitespace alone is no JSON document, and no empty body either: a
        # restore posted with the body "\t" was carried out (schemathesis
        # ST201). JSON's whitespace only: str.strip() would also drop
        # \x1c-\x1f, \x85 and Unicode spaces.
        if not text.strip(JSON_WHITESPACE):
            raise ParseError("malformed JSON: the body is whitespace only (send no body, or a JSON object)")
        try:
            data = json.loads(text, parse_constant=_reject_constant, parse_float=_finite)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"malformed JSON: {exc}") from None
        _check(data, self.max_depth, SURROGATE_ESCAPE.search(text) is not None)
        return data


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def _finite(literal: str) -> float:
    # 1e400 is valid JSON that Python reads as infinity, which no field means.
    value = float(literal)
    if math.isinf(value):
        raise ValueError(f"{literal[:40]} is beyond a 64-bit float")
    return value


def _check(value, limit: int, strings: bool) -> None:
    """Refuses nesting deeper than ``limit`` and, when ``strings``, any key or string that is not text."""
    stack = [(value, 1, "")]
    while stack:
        node, depth, where = stack.pop()
        if depth > limit and isinstance(node, (dict, list)):
            raise ParseError(f"JSON nested deeper than {limit} levels")
        if isinstance(node, dict):
            for key, item in node.items():
                if strings and SURROGATE.search(key):
                    raise ParseError(f"a field name{_at(where)} holds an unpaired UTF-16 surrogate: not text")
                if isinstance(item, (dict, list)) or (strings and isinstance(item, str)):
                    stack.append((item, depth + 1, f"{where}.{key}" if where else key))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                if isinstance(item, (dict, list)) or (strings and isinstance(item, str)):
                    stack.append((item, depth + 1, f"{where}[{index}]"))
        elif isinstance(node, str) and SURROGATE.search(node):
            raise ParseError(f"the string{_at(where)} holds an unpaired UTF-16 surrogate: not text")


def _at(where: str) -> str:
    # The path names the field, never the offending value (it is not printable text).
    return f" at {where!r}" if where else ""

"""JSON parsing that rejects what would otherwise surface as a 500 later."""

import json

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class StrictJSONParser(JSONParser):
    """Bounded size, UTF-8 only, no NaN/Infinity, bounded nesting."""

    max_depth = 32

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.SHARDLINE_MAX_BODY_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise ParseError(f"request body is larger than {limit} bytes (SHARDLINE_MAX_BODY_BYTES)")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"request body is not UTF-8: {exc.reason} at byte {exc.start}") from None
        if not text.strip():
            return {}
        try:
            data = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"malformed JSON: {exc}") from None
        _check_depth(data, self.max_depth)
        return data


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def _check_depth(value, limit):
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise ParseError(f"JSON nested deeper than {limit} levels")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))

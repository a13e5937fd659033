from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination, PageNumberPagination

from worker_sdk.protocol import BIGINT_MAX


def _bounded(request, name: str, low: int, high: int) -> int | None:
    """Query parameter ``name`` as an integer from ``low`` to ``high``; None when absent. DRF would take
    garbage for the default (page=abc is page 1), which the schema's integer does not allow."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit() and low <= int(raw) <= high):
        raise ValidationError({name: [f"an integer from {low} to {high}"]})
    return int(raw)


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request):
        return _bounded(request, self.page_size_query_param, 1, self.max_page_size) or self.page_size

    def get_page_number(self, request, paginator):
        return _bounded(request, self.page_query_param, 1, BIGINT_MAX) or 1


class ItemCursorPagination(CursorPagination):
    """Keyset pagination for audit rows: page 10,000 of a million items costs what page 1 does."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
    ordering = "id"

    def get_page_size(self, request):
        return _bounded(request, self.page_size_query_param, 1, self.max_page_size) or self.page_size

    def decode_cursor(self, request) -> Cursor | None:
        # DRF checks a cursor's offset and direction but hands its position
        # (an item id here) to the query as it is: "p=abc" was a 500.
        message = "not a cursor this API gave; follow the next and previous links"
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise ValidationError({"cursor": [message]}) from None
        if cursor is not None and cursor.position is not None:
            position = cursor.position
            if not (position.isascii() and position.isdigit() and int(position) <= BIGINT_MAX):
                raise ValidationError({"cursor": [message]})
        return cursor

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination, PageNumberPagination

from .serializers import BIGINT_MAX


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class ItemCursorPagination(CursorPagination):
    """Keyset pagination for audit rows: page 10,000 of a million items costs what page 1 does."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
    ordering = "id"

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

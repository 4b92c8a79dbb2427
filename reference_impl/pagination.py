"""Cursor pagination as OpenAI's list endpoints do it (input items, conversation items, files,
vector stores and their files): `order` asc|desc (default desc), `limit` 1..100 (default 20;
the Files API's 1..10,000, default 10,000), `after` / `before` item ids; the page is
`{object: list, data, first_id, last_id, has_more}`. The store reads one page at a time
(`sql_page.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequest
from .refusals import invalid_type, invalid_value

ORDERS = ("asc", "desc")


@dataclass(frozen=True)
class PageQuery:
    """Which page of a list a request asks for."""

    order: str = "desc"
    limit: int = 20
    after: str | None = None
    before: str | None = None


class UnknownCursor(InvalidRequest):
    def __init__(self, name: str, cursor: str) -> None:
        super().__init__(f"Invalid '{name}': no item with id '{cursor}' in this list.", param=name)


def list_query(query: Mapping[str, str], *, default_limit: int = 20, max_limit: int = 100) -> PageQuery:
    """The page a query string asks for, or OpenAI's 400."""
    order = query.get("order", "desc")
    if order not in ORDERS:
        raise invalid_value("order", order, ORDERS)
    raw_limit = query.get("limit", str(default_limit))
    try:
        limit = int(raw_limit)
    except ValueError as error:
        raise invalid_type("limit", "an integer", raw_limit) from error
    if limit < 1:
        raise InvalidRequest(f"Invalid 'limit': integer below minimum value. Expected a value >= 1, but got {limit} "
                             "instead.", param="limit", code="integer_below_min_value")
    if limit > max_limit:
        raise InvalidRequest(f"Invalid 'limit': integer above maximum value. Expected a value <= {max_limit}, but got "
                             f"{limit} instead.", param="limit", code="integer_above_max_value")
    return PageQuery(order, limit, query.get("after"), query.get("before"))


def page_object(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """The list object of one page of items."""
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": has_more}

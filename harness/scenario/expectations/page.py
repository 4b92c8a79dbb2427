"""The expectation of a list page (`{object: list, data, first_id, last_id, has_more}`): input
items, conversation items, stored responses. `first_id` and `last_id` are always checked
against `data`."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ...model.findings import Finding, Kind, Rule, Severity
from .. import vocabulary
from ..strict import Strict
from .spec import Answer, Expectation, Stated


class PageExpect(Strict):
    """A list page (`{object: list, data, first_id, last_id, has_more}`): input items,
    conversation items. `first_id` and `last_id` are always checked against `data`."""

    count: int | None = Field(default=None, ge=0)
    has_more: bool | None = None
    types: list[str] | None = Field(default=None, description="Item types of `data`, in order.")
    ids: list[str] | None = Field(default=None, description="Item ids of `data`, in order (placeholders allowed).")


class Page(Expectation):
    name = "page"
    annotation = PageExpect | None
    declared = Field(default=None, description="A list page's contents (list endpoints).")
    kind = Kind.RESPONSE_FIELD

    def lint(self, value: PageExpect, where: str, at: Stated) -> None:
        for index, item_type in enumerate(value.types or []):
            at.checks.known(f"{where}.types[{index}]", item_type, vocabulary.input_item_types(), "an item type")

    def compare(self, wanted: PageExpect, answer: Answer) -> list[Finding]:
        body = answer.exchange.body
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or body.get("object") != "list":
            return [self.mismatch("the body is not a list page ({object: list, data, first_id, last_id, has_more})",
                                  "a list", None)]
        ids = [item.get("id") for item in data]
        actual = {"count": len(data), "has_more": body.get("has_more"), "types": [item.get("type") for item in data],
                  "ids": ids}
        return [*_edges(body, ids),
                *(self.mismatch(f"the page's {name} is {actual[name]!r}, expected {want!r}", want, actual[name], name,
                                kind=Kind.ITEMS)
                  for name in sorted(wanted.model_fields_set) if (want := getattr(wanted, name)) != actual[name])]


def _edges(body: dict[str, Any], ids: list[Any]) -> list[Finding]:
    """`first_id` and `last_id` against the page's items, whatever the step states: named
    `page.<field>`, outside `expect`."""
    return [Finding(Kind.RESPONSE_FIELD, Severity.ERROR, Rule("page", (name,)), f"{name} is {body.get(name)!r} but "
                    f"the page's {edge} item is {held!r}", expected=held, actual=body.get(name))
            for name, edge, held in (("first_id", "first", ids[0] if ids else None),
                                     ("last_id", "last", ids[-1] if ids else None)) if body.get(name) != held]


SPECS = (Page(),)

"""What `parity probe` probes: every endpoint family the reference gateway serves, as OpenAI
describes it.

- `BodySurface`: a JSON request body (its description is `openai_contract.request_schema`: the
  `openai` SDK's type of it, tightened as OpenAI enforces it, with OpenAI's documented bounds).
- `Route`: a path with ids in it (`/{id}/items/{item}`), and the query parameters it takes (the
  SDK's type of them, and the range OpenAI's reference gives `limit` in words).

Paths and bodies name the objects they need by placeholder (`{response_id}`, `{vector_store_id}`);
`objects.py` creates them on the target before the probes go. Families: `responses` (create),
`responses.stored` (retrieve, delete, cancel, input items), `chat`, `conversations`,
`conversations.items`, `files`, `vector_stores`, `vector_stores.files`,
`vector_stores.file_batches`, `vector_stores.search`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from openai.types import file_list_params, vector_store_list_params
from openai.types.conversations import item_create_params, item_list_params, item_retrieve_params
from openai.types.responses import input_item_list_params, response_retrieve_params
from openai.types.vector_stores import file_batch_list_files_params
from openai.types.vector_stores import file_list_params as vector_store_file_list_params
from pydantic import TypeAdapter

from ...openai_contract.request_schema import (RequestSchema, chat_schema, conversation_schemas, responses_schema,
                                               vector_store_schemas)

PLACEHOLDERS = ("response_id", "conversation_id", "item_id", "file_id", "attachable_file_id", "vector_store_id",
                "batch_id")
"""The objects probes name, created on the target first (`objects.py`): a stored response, a
conversation and one of its items, an uploaded file, a vector store holding files with an
attribute `parity` (a number, a string, a boolean), a file the probes may attach and change,
and a file batch."""


def placeholder(name: str) -> str:
    return "{" + name + "}"


@dataclass(frozen=True)
class BodySurface:
    """A JSON request body: where it goes, its description, and its smallest valid instance."""

    name: str
    """The first part of its probes' ids (`responses`, `vector_stores.search`)."""
    family: str
    endpoint: str
    """The API (`responses`, `chat`, `conversations`, `files`, `vector_stores`)."""
    suffix: str
    """What follows the API's path (`/{vector_store_id}/search`), placeholders in it."""
    schema: RequestSchema
    base: Callable[[str, str], dict[str, Any]]
    """(model, input text) -> the smallest valid body."""
    required: tuple[str, ...] = ()
    shallow: tuple[str, ...] = ()
    """Fields whose own value is probed but not what nests in it, which another surface probes
    already (a conversation's `items`: adding items takes the same ones)."""

    def refuses(self, body: Any) -> bool:
        """Whether OpenAI's description of the body refuses `body`."""
        return not isinstance(body, dict) or any(key not in body for key in self.required) or \
            self.schema.first_violation(body) is not None


@cache
def body_surfaces() -> tuple[BodySurface, ...]:
    """Every JSON body of every family, `required` as OpenAI asks for it."""
    stores = vector_store_schemas()
    conversations = conversation_schemas()

    def message(text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    return (
        BodySurface("responses", "responses", "responses", "", responses_schema(),
                    lambda model, text: {"model": model, "input": text}, ("model", "input")),
        BodySurface("chat", "chat", "chat", "", chat_schema(),
                    lambda model, text: {"model": model, "messages": [message(text)]}, ("model", "messages")),
        BodySurface("conversations", "conversations", "conversations", "", conversations["create"],
                    lambda model, text: {}, shallow=("items",)),
        BodySurface("conversations.update", "conversations", "conversations", "/{conversation_id}",
                    conversations["update"], lambda model, text: {"metadata": {"parity": "probe"}}, ("metadata",)),
        BodySurface("conversations.items.create", "conversations.items", "conversations", "/{conversation_id}/items",
                    conversations["add_items"], lambda model, text: {"items": [message(text)]}, ("items",)),
        BodySurface("vector_stores", "vector_stores", "vector_stores", "", stores["vector_stores.create"],
                    lambda model, text: {}),
        BodySurface("vector_stores.update", "vector_stores", "vector_stores", "/{vector_store_id}",
                    stores["vector_stores.update"], lambda model, text: {"name": "parity probes"}),
        BodySurface("vector_stores.files.create", "vector_stores.files", "vector_stores", "/{vector_store_id}/files",
                    stores["vector_stores.files.create"],
                    lambda model, text: {"file_id": placeholder("attachable_file_id")}, ("file_id",)),
        BodySurface("vector_stores.files.update", "vector_stores.files", "vector_stores",
                    "/{vector_store_id}/files/{attachable_file_id}", stores["vector_stores.files.update"],
                    lambda model, text: {"attributes": {"parity": 2}}, ("attributes",)),
        BodySurface("vector_stores.file_batches.create", "vector_stores.file_batches", "vector_stores",
                    "/{vector_store_id}/file_batches", stores["vector_stores.file_batches.create"],
                    lambda model, text: {"file_ids": [placeholder("attachable_file_id")]}),
        BodySurface("vector_stores.search", "vector_stores.search", "vector_stores", "/{vector_store_id}/search",
                    stores["vector_stores.search"], lambda model, text: {"query": "parity"}, ("query",)),
    )


def surface_named(name: str) -> BodySurface:
    return next(surface for surface in body_surfaces() if surface.name == name)


@dataclass(frozen=True)
class QueryParameter:
    """One query parameter as the SDK types it: `integer`, `boolean`, `string`, or a list of
    allowed values (`array` of them, for `include`)."""

    name: str
    kind: str
    values: tuple[str, ...] = ()
    range: tuple[int, int] | None = None
    """The range OpenAI's reference gives in words (`limit` 1..100)."""

    def refuses(self, raw: str) -> bool:
        """Whether OpenAI's description refuses the query value `raw`."""
        if self.kind == "integer":
            digits = raw.removeprefix("-")
            if not (digits.isascii() and digits.isdigit()):
                return True
            low, high = self.range or (None, None)
            return len(digits) > 20 or (low is not None and int(raw) < low) or (high is not None and int(raw) > high)
        if self.kind == "boolean":
            return raw not in ("true", "false")
        return bool(self.values) and raw not in self.values


@dataclass(frozen=True)
class Route:
    """A path with ids in it, in one family; a POST sends the base body of `body`."""

    family: str
    method: str
    endpoint: str
    template: str
    """The path after the API's, with `{id}` for the API's own object and `{item}`, `{file}`,
    `{batch}` for the objects under it."""
    query: tuple[QueryParameter, ...] = ()
    body: str | None = None

    @property
    def route(self) -> str:
        return f"{self.method} /v1/{self.endpoint}{self.template}"


_OWN = {"responses": "response_id", "conversations": "conversation_id", "files": "file_id",
        "vector_stores": "vector_store_id"}
_UNDER = {"item": "item_id", "file": "attachable_file_id", "batch": "batch_id"}
SLOTS = {"id": _OWN, **{slot: dict.fromkeys(_OWN, name) for slot, name in _UNDER.items()}}


def filled(route: Route, replace: dict[str, str] | None = None) -> str:
    """The route's path with each slot's placeholder (`{id}` of a vector store is
    `{vector_store_id}`), or the text `replace` gives for a slot."""
    path = route.template
    for slot, names in SLOTS.items():
        value = (replace or {}).get(slot, placeholder(names[route.endpoint]))
        path = path.replace("{" + slot + "}", value)
    return path


def slots(route: Route) -> list[str]:
    return [slot for slot in SLOTS if "{" + slot + "}" in route.template]


def _query(params: Any, limit: tuple[int, int] | None = (1, 100), path: tuple[str, ...] = ()) -> tuple[
        QueryParameter, ...]:
    """The query parameters an SDK type of a list or retrieve call describes (its path's ids left out)."""
    schema = TypeAdapter(params).json_schema()
    found = []
    for name, node in schema["properties"].items():
        if name in path:
            continue
        items = node.get("items", {})
        if "enum" in node or "enum" in items:
            found.append(QueryParameter(name, "array" if "items" in node else "enum",
                                        tuple(node.get("enum") or items["enum"])))
        else:
            found.append(QueryParameter(name, node.get("type", "string"), range=limit if name == "limit" else None))
    return tuple(found)


@cache
def routes() -> tuple[Route, ...]:
    """Every route with an id or a query, family by family."""
    include = _query(item_create_params.ItemCreateParams, path=("items",))
    return (
        Route("responses.stored", "GET", "responses", "/{id}",
              _query(response_retrieve_params.ResponseRetrieveParamsBase)),
        Route("responses.stored", "DELETE", "responses", "/{id}"),
        Route("responses.stored", "GET", "responses", "/{id}/input_items",
              _query(input_item_list_params.InputItemListParams)),
        Route("responses.stored", "POST", "responses", "/{id}/cancel"),
        Route("conversations", "GET", "conversations", "/{id}"),
        Route("conversations", "POST", "conversations", "/{id}", body="conversations.update"),
        Route("conversations", "DELETE", "conversations", "/{id}"),
        Route("conversations.items", "GET", "conversations", "/{id}/items", _query(item_list_params.ItemListParams)),
        Route("conversations.items", "POST", "conversations", "/{id}/items", include,
              body="conversations.items.create"),
        Route("conversations.items", "GET", "conversations", "/{id}/items/{item}",
              _query(item_retrieve_params.ItemRetrieveParams, path=("conversation_id",))),
        Route("conversations.items", "DELETE", "conversations", "/{id}/items/{item}"),
        Route("files", "GET", "files", "", _query(file_list_params.FileListParams, limit=(1, 10_000))),
        Route("files", "GET", "files", "/{id}"),
        Route("files", "DELETE", "files", "/{id}"),
        Route("files", "GET", "files", "/{id}/content"),
        Route("vector_stores", "GET", "vector_stores", "", _query(vector_store_list_params.VectorStoreListParams)),
        Route("vector_stores", "GET", "vector_stores", "/{id}"),
        Route("vector_stores", "POST", "vector_stores", "/{id}", body="vector_stores.update"),
        Route("vector_stores", "DELETE", "vector_stores", "/{id}"),
        Route("vector_stores.files", "GET", "vector_stores", "/{id}/files",
              _query(vector_store_file_list_params.FileListParams)),
        Route("vector_stores.files", "POST", "vector_stores", "/{id}/files", body="vector_stores.files.create"),
        Route("vector_stores.files", "GET", "vector_stores", "/{id}/files/{file}"),
        Route("vector_stores.files", "POST", "vector_stores", "/{id}/files/{file}", body="vector_stores.files.update"),
        Route("vector_stores.files", "DELETE", "vector_stores", "/{id}/files/{file}"),
        Route("vector_stores.files", "GET", "vector_stores", "/{id}/files/{file}/content"),
        Route("vector_stores.file_batches", "POST", "vector_stores", "/{id}/file_batches",
              body="vector_stores.file_batches.create"),
        Route("vector_stores.file_batches", "GET", "vector_stores", "/{id}/file_batches/{batch}"),
        Route("vector_stores.file_batches", "POST", "vector_stores", "/{id}/file_batches/{batch}/cancel"),
        Route("vector_stores.file_batches", "GET", "vector_stores", "/{id}/file_batches/{batch}/files",
              _query(file_batch_list_files_params.FileBatchListFilesParams, path=("vector_store_id",))),
        Route("vector_stores.search", "POST", "vector_stores", "/{id}/search", body="vector_stores.search"),
    )

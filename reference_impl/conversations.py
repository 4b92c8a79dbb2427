"""The Conversations API: `/v1/conversations` and its items.

A conversation is created with metadata and up to 20 items; its items are listed with cursor
pagination (a page read from the store), added (up to 20 at a time), read and deleted one by
one. A body with a 21st item (or a 17th metadata key) is refused as soon as that one is parsed,
before the rest of the body is read or any item is checked. Deleting a conversation
answers `conversation.deleted` and, as OpenAI documents, leaves its items alone. Responses
created with `conversation` read its items as history and append their input and output
(see `service.py`); a file search's results are kept and listed only with `include`.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .client import with_ids
from .errors import NotFound
from .hosted_items import as_listed
from .ids import new_id
from .pagination import list_query, page_object
from .query import included
from .store import Conversation, ConversationStore
from ..openai_contract.request_schema import member_bounds
from .json_body import read_json_object
from .json_text import JsonAnswer
from .refusals import conversation_schemas, missing
from .validation import input_items



async def _checked(request: Request, kind: str, *required: str) -> dict[str, Any]:
    """The request's body, or the 400 OpenAI answers it with: too many items or metadata keys,
    a required key missing, then the first part that breaks the Conversations API's description
    of it."""
    def check(body: dict[str, Any]) -> dict[str, Any]:
        if absent := [key for key in required if key not in body]:
            raise missing(absent[0])
        if (violation := conversation_schemas()[kind].first_violation(body)) is not None:
            raise violation
        return body

    return await (await read_json_object(request, member_bounds(f"conversations.{kind}"))).checked(check)


def _items(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return with_ids(input_items(value))


def conversation_routes(store: ConversationStore) -> list[Route]:
    async def existing(conversation_id: str) -> Conversation:
        conversation = await store.get_conversation(conversation_id)
        if conversation is None:
            raise NotFound(f"Conversation with id '{conversation_id}' not found.")
        return conversation

    async def create(request: Request) -> Response:
        body = await _checked(request, "create")
        items = _items(body.get("items") or [])
        conversation = Conversation(new_id("conv"), int(time.time()), body.get("metadata") or {})
        await store.create_conversation(conversation, items)
        return JsonAnswer(conversation.resource())

    async def read(request: Request) -> Response:
        return JsonAnswer((await existing(request.path_params["conversation_id"])).resource())

    async def update(request: Request) -> Response:
        conversation_id = request.path_params["conversation_id"]
        await existing(conversation_id)
        body = await _checked(request, "update", "metadata")
        updated = await store.update_conversation(conversation_id, body["metadata"])
        assert updated is not None
        return JsonAnswer(updated.resource())

    async def delete(request: Request) -> Response:
        conversation_id = request.path_params["conversation_id"]
        await existing(conversation_id)
        await store.delete_conversation(conversation_id)
        return JsonAnswer({"id": conversation_id, "object": "conversation.deleted", "deleted": True})

    async def list_items(request: Request) -> Response:
        conversation_id = request.path_params["conversation_id"]
        await existing(conversation_id)
        include = included(request.query_params)
        items, more = await store.items_page(conversation_id, list_query(request.query_params))
        return JsonAnswer(page_object([as_listed(item, include) for item in items], more))

    async def add_items(request: Request) -> Response:
        conversation_id = request.path_params["conversation_id"]
        included(request.query_params)
        await existing(conversation_id)
        body = await _checked(request, "add_items", "items")
        items = _items(body["items"])
        await store.add_items(conversation_id, items)
        return JsonAnswer(page_object(items, False))

    async def find_item(conversation_id: str, item_id: str) -> dict[str, Any]:
        await existing(conversation_id)
        item = await store.item(conversation_id, item_id)
        if item is None:
            raise NotFound(f"Item with id '{item_id}' not found.")
        return item

    async def read_item(request: Request) -> Response:
        item = await find_item(request.path_params["conversation_id"], request.path_params["item_id"])
        return JsonAnswer(as_listed(item, included(request.query_params)))

    async def delete_item(request: Request) -> Response:
        conversation_id, item_id = request.path_params["conversation_id"], request.path_params["item_id"]
        await find_item(conversation_id, item_id)
        await store.delete_item(conversation_id, item_id)
        return JsonAnswer((await existing(conversation_id)).resource())

    base = "/v1/conversations/{conversation_id}"
    return [
        Route("/v1/conversations", create, methods=["POST"]),
        Route(base, read, methods=["GET"]),
        Route(base, update, methods=["POST"]),
        Route(base, delete, methods=["DELETE"]),
        Route(f"{base}/items", list_items, methods=["GET"]),
        Route(f"{base}/items", add_items, methods=["POST"]),
        Route(f"{base}/items/{{item_id}}", read_item, methods=["GET"]),
        Route(f"{base}/items/{{item_id}}", delete_item, methods=["DELETE"]),
    ]

"""The objects probes name (`surfaces.PLACEHOLDERS`), created on the target before the probes go:
a stored response, a conversation with one item, uploaded files, a vector store holding three
of them with an attribute `parity` of each kind (a number, a string, a boolean: a filter
compares each) and one the probes may attach and change, and a file batch.

Probes never delete or cancel one of these (only bad ids go to those routes), so they may run
in any order. An object the target cannot create (it lacks the API) keeps a name no object has,
and the probes naming it get whatever the target answers for an unknown id.
"""

from __future__ import annotations

from typing import Any

import httpx2

from ..engine.targets import Form, Target, send
from .surfaces import PLACEHOLDERS, placeholder

MISSING = "parity_probe_not_created"
"""What a placeholder stands for when its object could not be created."""
TEXT = b"parity probe text: the parity of a number is whether it is even or odd.\n"
SEARCHED = ({"parity": 1}, {"parity": "parity"}, {"parity": True})


def _id(answer: Any, key: str = "id") -> str | None:
    return answer.get(key) if isinstance(answer, dict) and isinstance(answer.get(key), str) else None


async def create_objects(http: httpx2.AsyncClient, target: Target, text: str) -> dict[str, str]:
    """Each placeholder's object, created on the target (`text`: the input of the response)."""
    api = target.responses_path.rsplit("/", 1)[0]

    async def post(path: str, body: Any) -> Any:
        exchange = await send(http, target, "POST", f"{api}/{path}", body)
        return exchange.body if exchange.status is not None and exchange.status < 300 else None

    async def upload(name: str) -> str | None:
        return _id(await post("files", Form({"purpose": "assistants"}, {"file": (name, TEXT)})))

    made: dict[str, str | None] = {
        "response_id": _id(await post("responses", {"model": target.model, "input": text, "store": True})),
        "conversation_id": _id(await post("conversations", {"items": [{"role": "user", "content": "parity"}]})),
        "file_id": await upload("parity-searched.txt"),
        "attachable_file_id": await upload("parity-attachable.txt"),
    }
    if made["conversation_id"] is not None:
        listed = await send(http, target, "GET", f"{api}/conversations/{made['conversation_id']}/items", None)
        data = listed.body.get("data") if isinstance(listed.body, dict) else None
        made["item_id"] = _id(data[0]) if isinstance(data, list) and data else None
    store = made["vector_store_id"] = _id(await post("vector_stores", {"name": "parity probes"}))
    if store is not None:
        for attributes, file_id in zip(SEARCHED, [made["file_id"], *[await upload(f"parity-{i}.txt") for i in (1, 2)]],
                                       strict=True):
            if file_id is not None:
                await post(f"vector_stores/{store}/files", {"file_id": file_id, "attributes": attributes})
        if made["attachable_file_id"] is not None:
            await post(f"vector_stores/{store}/files", {"file_id": made["attachable_file_id"]})
            made["batch_id"] = _id(await post(f"vector_stores/{store}/file_batches",
                                              {"file_ids": [made["attachable_file_id"]]}))
    return {name: made.get(name) or MISSING for name in PLACEHOLDERS}


def fill(text: str, objects: dict[str, str]) -> str:
    """`text` (a path) with each placeholder replaced by its object's id."""
    for name, value in objects.items():
        text = text.replace(placeholder(name), value)
    return text


def filled_body(body: Any, objects: dict[str, str]) -> Any:
    """A JSON body with each string that is a placeholder replaced by its object's id (probe
    bodies nest a few levels: this recursion is bounded by the generator's)."""
    if isinstance(body, dict):
        return {key: filled_body(value, objects) for key, value in body.items()}
    if isinstance(body, list):
        return [filled_body(value, objects) for value in body]
    if isinstance(body, str) and body.startswith("{") and body.endswith("}"):
        return objects.get(body[1:-1], body)
    return body

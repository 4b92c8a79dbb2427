"""A capture folder: the exchanges `parity proxy` recorded, one file per exchange in the
exchange file format (`exchange.py`), named `NNNN-<method>-<path>.json` in the order the
requests arrived. Each file's `meta` says where the request went: `path` (with its query, as
the client sent it, but for the values of credential parameters), `upstream` (the base URL it
was forwarded to) and `captured_at`; and, when they apply, `ended` (who ended the exchange
before its answer did: the client, or the proxy stopping), `note` and `request_note` (what of
the answer or the request body was not recorded). A WebSocket connection is one file,
`NNNN-ws-<path>.json`, in the connection format (`websocket.py`): its creates are read as
exchanges in the order they were sent.

Requests of one conversation name earlier answers by their ids (`previous_response_id`, an
approval's `approval_request_id`, a function output's `call_id`); `answer_ids` lists the ids an
answer hands out, by where they sit in it, so `parity replay` can put the new answer's ids in
their place and `parity scenario from-capture` a placeholder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ...openai_contract.documents import read_json
from ..errors import HarnessError
from .exchange import Exchange
from .websocket import connection_exchanges, is_connection

_UNSAFE = re.compile(r"[^A-Za-z0-9]+")
ID_FIELDS = ("id", "call_id")
"""The fields of an output item that later requests may name."""


def capture_name(number: int, method: str, path: str) -> str:
    """The file name of the `number`th exchange: `0001-post-v1-responses.json`."""
    words = _UNSAFE.sub("-", path.partition("?")[0]).strip("-").lower()[:60]
    return f"{number:04d}-{method.lower()}-{words or 'root'}.json"


@dataclass(frozen=True)
class Captured:
    """One captured exchange and the file it came from."""

    path: Path
    exchange: Exchange

    @property
    def request_path(self) -> str:
        """The path (and query) the client asked for."""
        recorded = self.exchange.meta.get("path")
        if isinstance(recorded, str):
            return recorded
        url = urlsplit(self.exchange.url)
        return (url.path or "/") + (f"?{url.query}" if url.query else "")


def connection_in(path: Path, data: Any) -> list[Exchange] | None:
    """The creates of a WebSocket connection file (`wire/websocket.py`), None for any other
    file; `HarnessError` names the file when it is a connection that cannot be read."""
    if not is_connection(data):
        return None
    try:
        return connection_exchanges(data)
    except ValueError as problem:
        raise HarnessError(f"{path}: {problem}") from problem


def read_capture(path: Path) -> list[Captured]:
    """The exchanges of one capture file (one, or a WebSocket connection's creates);
    `HarnessError` names the file and what is wrong with it."""
    try:
        data = read_json(path)
    except (OSError, ValueError) as problem:
        raise HarnessError(f"{path}: cannot read it as JSON ({problem})") from problem
    if (creates := connection_in(path, data)) is not None:
        return [Captured(path, exchange) for exchange in creates]
    if not isinstance(data, dict) or not isinstance(data.get("request"), dict) or \
            not isinstance(data.get("response"), dict):
        raise HarnessError(f"{path}: not a captured exchange (an object with `request` and `response` objects)")
    return [Captured(path, Exchange.from_file(data))]


def exchange_files(paths: list[Path]) -> list[Path]:
    """These files, with each folder replaced by its `*.json` files in name order (a capture
    folder's order of capture)."""
    return [file for path in paths for file in (sorted(path.glob("*.json")) if path.is_dir() else [path])]


def read_captures(paths: list[Path]) -> list[Captured]:
    """The exchanges in these files and folders (`exchange_files`); `HarnessError` when one is
    unreadable or there are none."""
    files = exchange_files(paths)
    if not files:
        raise HarnessError(f"no capture files in {', '.join(map(str, paths))}")
    return [captured for file in files for captured in read_capture(file)]


def answer_of(exchange: Exchange) -> dict[str, Any] | None:
    """The object whose ids later requests may name: the Response, else any JSON object body
    (a conversation, an item list)."""
    return exchange.response_object() or (exchange.body if isinstance(exchange.body, dict) else None)


def answer_ids(exchange: Exchange) -> dict[str, str]:
    """The ids an answer hands out -> where they sit in it, as a scenario's placeholders name
    them: `response.id` (`body.id` for an answer that is no Response), `output[N].id`,
    `output[N].call_id`."""
    answer = answer_of(exchange)
    if not isinstance(answer, dict):
        return {}
    root = "response" if exchange.response_object() is not None else "body"
    ids = {answer["id"]: f"{root}.id"} if isinstance(answer.get("id"), str) else {}
    for index, item in enumerate(answer.get("output") or []):
        if isinstance(item, dict):
            ids |= {item[name]: f"output[{index}].{name}" for name in ID_FIELDS if isinstance(item.get(name), str)}
    return ids


def id_at(exchange: Exchange, place: str) -> str | None:
    """The id at `place` (as `answer_ids` names it) in another answer, or None when it has none there."""
    answer = answer_of(exchange)
    if not isinstance(answer, dict):
        return None
    if place in ("response.id", "body.id"):
        return answer.get("id") if isinstance(answer.get("id"), str) else None
    index, _, name = place.removeprefix("output[").partition("].")
    output = answer.get("output") or []
    item = output[int(index)] if int(index) < len(output) else None
    value = item.get(name) if isinstance(item, dict) else None
    return value if isinstance(value, str) else None


def replace_ids(value: Any, replacements: dict[str, str]) -> Any:
    """`value` with every string that is exactly one of the ids replaced."""
    if isinstance(value, str):
        return replacements.get(value, value)
    if isinstance(value, dict):
        return {key: replace_ids(item, replacements) for key, item in value.items()}
    if isinstance(value, list):
        return [replace_ids(item, replacements) for item in value]
    return value


def replace_ids_in_path(path: str, replacements: dict[str, str]) -> str:
    """`path` (with its query) with every segment that is exactly one of the ids replaced."""
    bare, mark, query = path.partition("?")
    return "/".join(replacements.get(part, part) for part in bare.split("/")) + mark + query

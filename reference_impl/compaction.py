"""Compaction: a conversation's earlier turns replaced by what the model summarised of them.

- The summary turn: the model, told to summarise (`SUMMARY_INSTRUCTIONS`), reads the transcript
  with no tools; the text it answers is the summary.
- A compaction item, `{type: compaction, id: cmp_..., encrypted_content}`, carries the summary
  as a token only this gateway reads back (`sealing.py`).
- Read back as input, an item is what the model reads of it: a developer message holding the
  summary (`summary_message`), its id the item's, so a later compaction knows it.
- The compacted window: the user messages since the latest summary, then a new compaction item
  whose summary covers everything before (that summary too). `POST /v1/responses/compact`
  answers it (as OpenAI does: user messages kept, assistant turns dropped), and a response whose
  `context_management` threshold is reached ends with the item and keeps the window as its chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .errors import UpstreamError
from .ids import new_id
from .sealing import Sealer
from .upstream.adapter import UpstreamAdapter, model_events
from .upstream.items import ItemDone, Message, TranscriptItem, TurnDone, TurnRequest

SUMMARY_INSTRUCTIONS = ("Summarize the conversation so far for your own later use: every fact, decision and open "
                        "question a continuation needs. Answer with the summary only.")
SUMMARY_PREFIX = "Summary of the conversation so far:\n"
DEFAULT_THRESHOLD = 200_000
"""Tokens of context at which a `compact_threshold: null` compacts (the reference's choice:
OpenAI documents no default)."""


@dataclass(frozen=True)
class ContextManagement:
    """A request's `context_management`: compact once the context reaches `threshold` tokens."""

    threshold: int
    sealer: Sealer


def context_management(raw: Any, sealer: Sealer) -> ContextManagement | None:
    """The compaction entry of a valid `context_management` list, if it has one."""
    for entry in raw or []:
        if entry.get("type") == "compaction":
            threshold = entry.get("compact_threshold")
            return ContextManagement(DEFAULT_THRESHOLD if threshold is None else threshold, sealer)
    return None


def summary_message(item_id: str, summary: str) -> Message:
    """What the model reads of a compaction item."""
    return Message("developer", SUMMARY_PREFIX + summary, id=item_id)


def is_summary(item: TranscriptItem) -> bool:
    return isinstance(item, Message) and bool(item.id) and str(item.id).startswith("cmp_")


def compaction_item(sealer: Sealer, summary: str) -> dict[str, Any]:
    return {"id": new_id("cmp"), "type": "compaction", "encrypted_content": sealer.seal("compaction", summary)}


def _kept_messages(transcript: Sequence[TranscriptItem]) -> list[Message]:
    """The user messages since the latest summary."""
    since = max((index + 1 for index, item in enumerate(transcript) if is_summary(item)), default=0)
    return [item for item in transcript[since:] if isinstance(item, Message) and item.role == "user"]


def _message_item(message: Message) -> dict[str, Any]:
    """A kept user message as an output item."""
    content = message.content if isinstance(message.content, list) else [{"type": "input_text",
                                                                          "text": message.content}]
    return {"id": message.id, "type": "message", "status": "completed", "role": "user", "content": content}


def compacted(transcript: Sequence[TranscriptItem], item: dict[str, Any],
              summary: str) -> tuple[list[dict[str, Any]], list[TranscriptItem]]:
    """The compacted window: as output items, and as the transcript a continuation starts from."""
    kept = [replace(message, id=message.id or new_id("msg")) for message in _kept_messages(transcript)]
    return [*map(_message_item, kept), item], [*kept, summary_message(item["id"], summary)]


async def summarise(adapter: UpstreamAdapter, model: str, transcript: tuple[TranscriptItem, ...],
                    instructions: str | None = None) -> tuple[str, dict[str, Any] | None]:
    """The summary turn: the summary the model answers, and the turn's usage. The request's own
    `instructions` come first in what it reads."""
    head = (Message("developer", instructions),) if instructions else ()
    turn = TurnRequest(model=model, instructions=SUMMARY_INSTRUCTIONS, transcript=head + transcript, tools=(),
                       tool_choice="auto", parallel_tool_calls=True, stream=False)
    summary: str | None = None
    usage = None
    async for event in model_events(adapter, turn):
        match event:
            case ItemDone(item=Message(content=content)):
                summary = (summary or "") + str(content)
            case TurnDone(usage=reported):
                usage = reported
    if summary is None:
        raise UpstreamError(502, "The model answered the summary turn without a message.")
    return summary, usage

"""The expectation of a chat completion (the `chat` surface): its finish reason, role, whether
it has text, the tool calls it hands back, and for streams the kinds of its chunks."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ...model.contract import Contract
from ...model.findings import Finding, Kind
from .. import vocabulary
from ..strict import Strict
from .spec import NOT_STATED, STREAM_ONLY, Answer, Expectation, Stated, list_diff


class ChatExpect(Strict):
    """A chat completion's contract (the `chat` surface)."""

    finish_reason: str | None = None
    role: str | None = None
    content: bool | None = Field(default=None, description="Whether the message has text content.")
    tool_calls: list[str] | None = Field(default=None, description="Names of the tool calls handed back, in order.")
    chunks: list[str] | None = Field(
        default=None, description="Kinds of the stream's chunks in order, runs collapsed: role, content, "
                                  "tool_calls, finish, usage, error, [DONE].")


class Chat(Expectation):
    name = "chat"
    annotation = ChatExpect | None
    kind = Kind.RESPONSE_FIELD
    live_model_decides = True

    def lint(self, value: ChatExpect, where: str, at: Stated) -> None:
        if value.finish_reason is not None:
            at.checks.known(f"{where}.finish_reason", value.finish_reason, vocabulary.chat_finish_reasons(),
                            "a chat finish_reason")
        for index, name in enumerate(value.tool_calls or []):
            at.checks.tool(f"{where}.tool_calls[{index}]", name)
        if value.chunks is not None and not at.stream_modes:
            at.checks.add(f"{where}.chunks", f"{STREAM_ONLY}, and this step never streams")

    def compare(self, wanted: ChatExpect, answer: Answer) -> list[Finding]:
        chat = answer.contract.chat
        if chat is None:
            return [self.mismatch("the answer carries no chat completion", "a completion", None)]
        actual = {"finish_reason": chat.finish_reason, "role": chat.role, "content": chat.has_content,
                  "tool_calls": list(chat.tool_calls), "chunks": list(chat.chunks)}
        findings = []
        for name in sorted(wanted.model_fields_set):
            want = getattr(wanted, name)
            if want == actual[name] or (name == "chunks" and not chat.chunks):  # an answer that did not stream
                continue
            if name == "chunks":
                findings.append(self.mismatch(f"chunk sequence differs: {list_diff(want, actual[name])}", want,
                                              actual[name], name, kind=Kind.EVENT_SEQUENCE))
            else:
                findings.append(self.mismatch(f"the completion's {name} is {actual[name]!r}, expected {want!r}",
                                              want, actual[name], name))
        return findings

    def project(self, contract: Contract) -> Any:
        chat = contract.chat
        if chat is None:
            return NOT_STATED
        stated: dict[str, Any] = {"finish_reason": chat.finish_reason, "role": chat.role,
                                  "tool_calls": list(chat.tool_calls)}
        if contract.stream is not None or chat.chunks:
            stated["chunks"] = list(chat.chunks)
        return stated


SPECS = (Chat(),)

"""Client events, built in OpenAI's shapes and order; the one place output indices are given.

The driver says what happens ("a message starts", "an MCP call finished"); the emitter turns
that into `response.*` events and appends them to the event log, which numbers them. It also
keeps the client-visible output list that the terminal response carries.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..ids import new_id


class EventSink(Protocol):
    def append(self, event_type: str, fields: dict[str, Any]) -> None: ...


def _text_part(text: str = "") -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


class Emitter:
    def __init__(self, sink: EventSink) -> None:
        self._sink = sink
        self.output: list[dict[str, Any] | None] = []
        """Client-visible items by output index; None while an item is still open."""

    def emit(self, event_type: str, **fields: Any) -> None:
        self._sink.append(event_type, fields)

    def lifecycle(self, event_type: str, response: dict[str, Any]) -> None:
        self.emit(event_type, response=response)

    def added(self, item: dict[str, Any]) -> int:
        index = len(self.output)
        self.output.append(None)
        self.emit("response.output_item.added", output_index=index, item=item)
        return index

    def done(self, index: int, item: dict[str, Any]) -> None:
        self.output[index] = item
        self.emit("response.output_item.done", output_index=index, item=item)

    def finished_output(self) -> list[dict[str, Any]]:
        return [item for item in self.output if item is not None]

    def open_indices(self) -> list[int]:
        return [index for index, item in enumerate(self.output) if item is None]

    # -- messages --------------------------------------------------------------------------

    def message_started(self) -> tuple[int, str]:
        item_id = new_id("msg")
        index = self.added({"id": item_id, "type": "message", "status": "in_progress", "content": [],
                            "role": "assistant"})
        self.emit("response.content_part.added", item_id=item_id, output_index=index, content_index=0,
                  part=_text_part())
        return index, item_id

    def text_delta(self, index: int, item_id: str, delta: str) -> None:
        self.emit("response.output_text.delta", item_id=item_id, output_index=index, content_index=0,
                  delta=delta, logprobs=[])

    def message_done(self, index: int, item_id: str, text: str, incomplete: bool) -> None:
        self.emit("response.output_text.done", item_id=item_id, output_index=index, content_index=0,
                  text=text, logprobs=[])
        self.emit("response.content_part.done", item_id=item_id, output_index=index, content_index=0,
                  part=_text_part(text))
        self.done(index, {"id": item_id, "type": "message", "status": "incomplete" if incomplete else "completed",
                          "content": [_text_part(text)], "role": "assistant"})

    # -- reasoning -------------------------------------------------------------------------

    def reasoning_started(self) -> tuple[int, str]:
        item_id = new_id("rs")
        return self.added({"id": item_id, "type": "reasoning", "summary": []}), item_id

    def summary_part_started(self, index: int, item_id: str, summary_index: int) -> None:
        self.emit("response.reasoning_summary_part.added", item_id=item_id, output_index=index,
                  summary_index=summary_index, part={"type": "summary_text", "text": ""})

    def summary_delta(self, index: int, item_id: str, summary_index: int, delta: str) -> None:
        self.emit("response.reasoning_summary_text.delta", item_id=item_id, output_index=index,
                  summary_index=summary_index, delta=delta)

    def summary_part_done(self, index: int, item_id: str, summary_index: int, text: str) -> None:
        self.emit("response.reasoning_summary_text.done", item_id=item_id, output_index=index,
                  summary_index=summary_index, text=text)
        self.emit("response.reasoning_summary_part.done", item_id=item_id, output_index=index,
                  summary_index=summary_index, part={"type": "summary_text", "text": text})

    def reasoning_done(self, index: int, item_id: str, summary: tuple[str, ...]) -> None:
        self.done(index, {"id": item_id, "type": "reasoning",
                          "summary": [{"type": "summary_text", "text": text} for text in summary]})

    # -- tools -----------------------------------------------------------------------------

    def function_call(self, call_id: str, name: str, arguments: str) -> dict[str, Any]:
        """A client-executed function call, whole: added, arguments, done."""
        item = {"id": new_id("fc"), "type": "function_call", "status": "in_progress", "arguments": "",
                "call_id": call_id, "name": name}
        index = self.added(item)
        self.emit("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                  delta=arguments)
        self.emit("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                  name=name, arguments=arguments)
        final = item | {"status": "completed", "arguments": arguments}
        self.done(index, final)
        return final

    def list_tools_started(self, server_label: str) -> tuple[int, str]:
        item_id = new_id("mcpl")
        index = self.added({"id": item_id, "type": "mcp_list_tools", "server_label": server_label, "tools": []})
        self.emit("response.mcp_list_tools.in_progress", item_id=item_id, output_index=index)
        return index, item_id

    def list_tools_done(self, index: int, item_id: str, server_label: str, tools: list[dict[str, Any]],
                        error: str | None = None) -> None:
        self.emit("response.mcp_list_tools.failed" if error else "response.mcp_list_tools.completed",
                  item_id=item_id, output_index=index)
        item: dict[str, Any] = {"id": item_id, "type": "mcp_list_tools", "server_label": server_label, "tools": tools}
        if error:
            item["error"] = error
        self.done(index, item)

    def mcp_call_started(self, server_label: str, name: str, arguments: str,
                         approval_request_id: str | None) -> tuple[int, dict[str, Any]]:
        item = {"id": new_id("mcp"), "type": "mcp_call", "status": "in_progress",
                "approval_request_id": approval_request_id, "arguments": "", "error": None, "name": name,
                "output": None, "server_label": server_label}
        index = self.added(item)
        self.emit("response.mcp_call.in_progress", item_id=item["id"], output_index=index)
        self.emit("response.mcp_call_arguments.delta", item_id=item["id"], output_index=index, delta=arguments)
        self.emit("response.mcp_call_arguments.done", item_id=item["id"], output_index=index, arguments=arguments)
        return index, item | {"arguments": arguments}

    def mcp_call_done(self, index: int, item: dict[str, Any], output: str | None,
                      error: dict[str, Any] | None) -> dict[str, Any]:
        failed = error is not None
        self.emit("response.mcp_call.failed" if failed else "response.mcp_call.completed",
                  item_id=item["id"], output_index=index)
        final = item | {"status": "failed" if failed else "completed", "output": output, "error": error}
        self.done(index, final)
        return final

    def approval_request(self, server_label: str, name: str, arguments: str) -> dict[str, Any]:
        item = {"id": new_id("mcpr"), "type": "mcp_approval_request", "arguments": arguments, "name": name,
                "server_label": server_label}
        self.done(self.added(item), item)
        return item

    def error(self, error_type: str, code: str | None, message: str, param: str | None) -> None:
        """OpenAI's in-stream `error` event, nested as real streams carry it."""
        self.emit("error", error={"type": error_type, "code": code, "message": message, "param": param})

"""Expectations of the Response object (in a stream, the one its terminal event carries): its
status and incomplete reason, whether it has usage, its output items, what it stops on for the
client, and any part of it. An answer without a Response fails these together, once (`expect`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from ...model.contract import Contract, ItemShape, encrypted_detail
from ...model.findings import Finding, Kind
from .. import vocabulary
from ..strict import Strict
from .spec import NOT_STATED, Answer, Expectation, Stated, WhenWritten, list_diff, of_a_response, subset_mismatches


class Status(WhenWritten, Expectation):
    name = "status"
    annotation = str | None
    kind = Kind.STATUS
    of_response = live_model_decides = True

    def lint(self, value: str, where: str, at: Stated) -> None:
        if value is not None and not at.deviation:
            at.checks.known(where, value, vocabulary.response_statuses(), "a Response status")

    def compare(self, wanted: str | None, answer: Answer) -> list[Finding]:
        got = answer.contract.status
        return [] if got == wanted else [self.mismatch(f"status is {got!r}, expected {wanted!r}", wanted, got)]

    def project(self, contract: Contract) -> Any:
        return contract.status if of_a_response(contract) and contract.status is not None else NOT_STATED


class IncompleteReason(WhenWritten, Expectation):
    name = "incomplete_reason"
    annotation = str | None
    kind = Kind.STATUS
    of_response = True

    def lint(self, value: str | None, where: str, at: Stated) -> None:
        if value is not None and not at.deviation:
            at.checks.known(where, value, vocabulary.incomplete_reasons(), "an incomplete reason")

    def compare(self, wanted: str | None, answer: Answer) -> list[Finding]:
        got = answer.contract.incomplete_reason
        return [] if got == wanted else [self.mismatch(f"incomplete_reason is {got!r}, expected {wanted!r}",
                                                       wanted, got)]

    def project(self, contract: Contract) -> Any:
        """A Response's reason, null included: a golden that completed states that it has none."""
        return contract.incomplete_reason if of_a_response(contract) else NOT_STATED


class Usage(Expectation):
    name = "usage"
    annotation = bool | None
    declared = Field(default=None, description="Whether `usage` is present.")
    kind = Kind.RESPONSE_FIELD
    of_response = live_model_decides = True

    def compare(self, wanted: bool, answer: Answer) -> list[Finding]:
        got = answer.contract.has_usage
        if got == wanted:
            return []
        return [self.mismatch(f"usage is {'present' if got else 'absent'}, expected "
                              f"{'present' if wanted else 'absent'}", wanted, got)]

    def project(self, contract: Contract) -> Any:
        """Whether a Response or a chat completion has usage."""
        stated = of_a_response(contract) or contract.chat is not None
        return contract.has_usage if stated and contract.has_usage is not None else NOT_STATED


_ITEM_FIELD_OF = {"status": "status", "role": "role", "name": "name", "server_label": "server_label",
                  "error_type": "error", "approval_linked": "approval_request_id", "encrypted": "encrypted_content"}
"""An item expectation's field -> the item field it looks at."""


def _item_shorthand(value: Any) -> Any:
    return {"type": value} if isinstance(value, str) else value


class ItemExpect(Strict):
    """An expected output item. The shorthand `message` means `{type: message}`."""

    type: str
    status: str | None = None
    role: str | None = None
    name: str | None = None
    server_label: str | None = None
    error_type: str | None = Field(default=None, description="For mcp_call: the type of its `error`.")
    approval_linked: bool | None = Field(
        default=None, description="For mcp_call: true when `approval_request_id` names an approval request this "
                                  "request approved (an `mcp_approval_response` in its input), false when it is null.")
    encrypted: bool | None = Field(
        default=None, description="For reasoning and compaction: whether it carries `encrypted_content` (OpenAI adds a "
                                  "reasoning item's only when `include` asks for `reasoning.encrypted_content`).")

    def matches(self, actual: ItemShape) -> bool:
        """Whether `actual` has every field this expectation gives (the others are not compared)."""
        return all(getattr(actual, name) == getattr(self, name) for name in self.model_fields_set)

    def label(self) -> str:
        """Short form for messages, as `ItemShape.label` writes an item: `mcp_call(add, failed)`."""
        details = [str(getattr(self, name)) for name in ("name", "status") if name in self.model_fields_set]
        if self.encrypted is not None:
            details.append(encrypted_detail(self.encrypted))
        return f"{self.type}({', '.join(details)})" if details else self.type


ItemSpec = Annotated[ItemExpect, BeforeValidator(_item_shorthand, json_schema_input_type=str | ItemExpect)]


class Output(Expectation):
    name = "output"
    annotation = list[ItemSpec] | None
    kind = Kind.ITEMS
    of_response = live_model_decides = True

    def lint(self, value: list[ItemExpect], where: str, at: Stated) -> None:
        for index, item in enumerate(value):
            self._lint_item(item, f"{where}[{index}]", at)

    @staticmethod
    def _lint_item(item: ItemExpect, where: str, at: Stated) -> None:
        if item.type not in vocabulary.output_item_types():
            at.checks.known(f"{where}.type", item.type, vocabulary.output_item_types(), "an output item type")
            return
        fields = vocabulary.item_fields(item.type)
        for name in sorted(item.model_fields_set - {"type"}):
            if _ITEM_FIELD_OF[name] not in fields:
                at.checks.add(f"{where}.{name}", f"a {item.type} item has no `{_ITEM_FIELD_OF[name]}`")
        statuses = vocabulary.item_statuses(item.type)
        if item.status is not None and statuses:
            at.checks.known(f"{where}.status", item.status, statuses, f"a status of a {item.type} item")
        if item.name is not None and "name" in fields:
            at.checks.tool(f"{where}.name", item.name)

    def compare(self, wanted: list[ItemExpect], answer: Answer) -> list[Finding]:
        actual = answer.contract.output
        if len(wanted) == len(actual) and all(e.matches(a) for e, a in zip(wanted, actual, strict=True)):
            return []
        expected_labels, actual_labels = [e.label() for e in wanted], [a.label() for a in actual]
        types_expected, types_actual = [e.type for e in wanted], [a.type for a in actual]
        if types_expected == types_actual:
            message = "; ".join(f"output[{i}]: expected {el}, got {al}" for i, (e, a, el, al)
                                in enumerate(zip(wanted, actual, expected_labels, actual_labels, strict=True))
                                if not e.matches(a))
        else:
            message = f"output item types differ: {list_diff(types_expected, types_actual)}"
        return [self.mismatch(message, expected_labels, actual_labels)]

    def project(self, contract: Contract) -> Any:
        if not of_a_response(contract):
            return NOT_STATED
        return [{k: v for k, v in vars(item).items() if v is not None} for item in contract.output]


def _interrupt_shorthand(value: Any) -> Any:
    return {"on": value} if isinstance(value, str) else value


class InterruptExpect(Strict):
    """What the response stops on and waits for the client: a client-executed function call,
    an MCP approval request, or nothing. The shorthand `none` means `{on: none}`."""

    on: Literal["none", "function_call", "mcp_approval_request"]
    tool: str | None = None


class Interrupt(Expectation):
    name = "interrupt"
    annotation = Annotated[InterruptExpect, BeforeValidator(_interrupt_shorthand,
                                                            json_schema_input_type=str | InterruptExpect)] | None
    kind = Kind.INTERRUPT
    of_response = live_model_decides = True

    def lint(self, value: InterruptExpect, where: str, at: Stated) -> None:
        if value.tool is None:
            return
        if value.on == "none":
            at.checks.add(f"{where}.tool", "a response that stops on nothing stops on no tool")
        else:
            at.checks.tool(f"{where}.tool", value.tool)

    def compare(self, wanted: InterruptExpect, answer: Answer) -> list[Finding]:
        got = answer.contract.interrupt
        if got.on == wanted.on and ("tool" not in wanted.model_fields_set or got.tool == wanted.tool):
            return []
        return [self.mismatch(f"the response stops on {got.on}{f' ({got.tool})' if got.tool else ''}, "
                              f"expected {wanted.on}{f' ({wanted.tool})' if wanted.tool else ''}",
                              wanted.model_dump(), {"on": got.on, "tool": got.tool})]

    def project(self, contract: Contract) -> Any:
        if not of_a_response(contract):
            return NOT_STATED
        return {k: v for k, v in vars(contract.interrupt).items() if v is not None}


class ResponsePart(Expectation):
    name = "response"
    annotation = dict[str, Any] | None
    declared = Field(default=None, description="A part of the Response object (in a stream, the terminal event's): "
                                               "every key given must be there with a matching value; lists match "
                                               "item by item.")
    kind = Kind.RESPONSE_FIELD
    of_response = live_model_decides = True

    def lint(self, value: dict[str, Any], where: str, at: Stated) -> None:
        for name in value:
            at.checks.known(f"{where}.{name}", name, vocabulary.response_fields(), "a Response field")

    def compare(self, wanted: dict[str, Any], answer: Answer) -> list[Finding]:
        fields = answer.contract.response_fields or {}
        shown = {key: fields.get(key) for key in wanted}
        return [self.mismatch(f"the Response differs at {where}", wanted, shown)
                for where in subset_mismatches(wanted, fields)]


SPECS = (Status(), IncompleteReason(), Usage(), Output(), Interrupt(), ResponsePart())

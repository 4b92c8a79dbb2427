"""What an expectation is: one field a step may state, with everything the harness does with it
in one class. A spec declares the field (its type and description: the scenario model and the
schema shipped for editors are generated from the specs), checks what a file states in it before
anything runs (`lint`), holds an answer against it (`compare`) and says what a recorded answer
states for it (`project`: how a golden or a captured answer becomes an expectation).

Its findings are of the aspect of the contract it judges (`kind`) and are named after it
(`expect.<name>`, or a part below it: `expect.error.code`). A comparison returns every finding it
makes, so a spec that reports each difference rather than the first needs no change elsewhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from pydantic import Field
from pydantic.fields import FieldInfo

from ...defaults import Mode
from ...model.contract import Contract
from ...model.findings import Finding, Kind, Rule, Severity
from ...model.observed import Observed
from ...wire.exchange import Exchange

STREAM_ONLY = "is compared only on streamed answers"


class NotStated:
    """What `project` returns for a field a recorded answer says nothing about."""


NOT_STATED = NotStated()


class Checks(Protocol):
    """How `lint` reports: the problem list, with the name checks of the scenario being linted."""

    @property
    def fixtures(self) -> Collection[str]:
        """The scenario's MCP fixtures."""

    def add(self, where: str, message: str) -> None: ...

    def known(self, where: str, value: str, universe: Collection[str], what: str) -> None:
        """A problem unless `value` is in `universe` (`what` names it: `an item type`)."""

    def tool(self, where: str, name: str) -> None:
        """A problem unless the scenario offers a tool `name`."""


@dataclass(frozen=True)
class Stated:
    """Where an expectation is stated, as its checks of meaning need to know it."""

    checks: Checks
    stream_modes: Sequence[Mode]
    """The stream modes in which the step's answer is a stream (none: it never streams)."""
    in_variant: bool = False
    """Inside `variants`: it names an end state of the answer."""
    judged_on_answers: bool = False
    """Inside `variants` or `poll.until`, which judge an answer only (never what reached the fixtures)."""
    deviation: bool = False
    """Inside a warning variant, which describes values OpenAI never sends."""


@dataclass(frozen=True)
class Answer:
    """An answer as expectations read it: its contract and its exchange."""

    contract: Contract
    exchange: Exchange

    @property
    def streamed(self) -> bool:
        return self.exchange.streamed

    @property
    def has_response(self) -> bool:
        """Whether the answer carries a Response (for a stream, its terminal event does)."""
        return self.contract.response_fields is not None


def of_a_response(contract: Contract) -> bool:
    """Whether a recorded answer is a Response (not an error, a list, a chat completion)."""
    return contract.response_fields is not None and contract.chat is None


class Spec:
    """A field of an expectation, with the findings it makes named after it."""

    name: ClassVar[str]
    annotation: ClassVar[Any]
    """The field's type as a scenario file states it."""
    declared: ClassVar[FieldInfo] = Field(default=None)
    """Its default and description (the schema's), as pydantic declares them."""
    kind: ClassVar[Kind]
    """The aspect of the contract its findings report."""
    family: ClassVar[tuple[str, ...]] = ("expect",)
    """The rule its findings are named under: `expect`, then the field."""

    def stated(self, value: Any, written: bool) -> bool:
        """Whether a step states the field (`written`: the file gives it, maybe as null), so
        that it is checked and compared. Null is no statement, unless a spec says otherwise."""
        return value is not None

    def lint(self, value: Any, where: str, at: Stated) -> None:
        """Report through `at.checks` what is wrong with what a file states (a name that does not exist, ...)."""

    def rule(self, *part: str) -> Rule:
        return Rule(self.family[0], (*self.family[1:], self.name, *part))

    def mismatch(self, message: str, expected: Any, actual: Any, *part: str, kind: Kind | None = None) -> Finding:
        return Finding(kind or self.kind, Severity.ERROR, self.rule(*part), message, expected=expected, actual=actual)


class Expectation(Spec):
    """A field of a step's `expect`: it judges the answer."""

    streams_only: ClassVar[bool] = False
    """Judged on streamed answers only (stated on a step that never streams, it is an error)."""
    of_response: ClassVar[bool] = False
    """Read from the Response object: an answer without one fails all such fields at once."""
    live_model_decides: ClassVar[bool] = False
    """A live model decides it, so a scenario may list it in `live.model_dependent`."""

    def compare(self, wanted: Any, answer: Answer) -> list[Finding]:
        """Every way the answer differs from what is wanted."""
        raise NotImplementedError

    def project(self, contract: Contract) -> Any:
        """What a recorded answer (its contract) states for this field, or `NOT_STATED`."""
        return NOT_STATED


class UpstreamExpectation(Spec):
    """A field of `expect.upstream`: it judges what the gateway sent to the fixtures."""

    family = ("expect", "upstream")
    kind = Kind.UPSTREAM_REQUEST

    def compare(self, wanted: Any, observed: Observed) -> list[Finding]:
        """Every way what the fixtures observed differs from what is wanted."""
        raise NotImplementedError


class WhenWritten:
    """A mixin for fields whose null is a value to compare (`incomplete_reason: null`)."""

    def stated(self, value: Any, written: bool) -> bool:
        return written


def list_diff(expected: Sequence[str], actual: Sequence[str]) -> str:
    """A one-line description of how two sequences differ."""
    parts = []
    matcher = difflib.SequenceMatcher(a=expected, b=actual, autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op == "delete":
            parts.append(f"missing {', '.join(expected[a1:a2])} at {a1}")
        elif op == "insert":
            parts.append(f"unexpected {', '.join(actual[b1:b2])} at {b1}")
        elif op == "replace":
            parts.append(f"{', '.join(actual[b1:b2])} instead of {', '.join(expected[a1:a2])} at {a1}")
    return "; ".join(parts)


def subset_mismatches(expected: Any, actual: Any, where: str = "$") -> list[str]:
    """Every place where `actual` fails to hold `expected` (dict keys given must match,
    recursively; lists match item by item and in length; an empty object means an empty one),
    each as its path and what is there; none when it holds it. The walk follows `expected`
    (a scenario's, bounded as every scenario file is), so a large `actual` costs nothing more."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where} (expected an object)"]
        if not expected and actual:
            return [f"{where} (expected an empty object, got keys {', '.join(sorted(actual))})"]
        return [found for key, value in expected.items()
                for found in ([f"{where}.{key} (missing)"] if key not in actual
                              else subset_mismatches(value, actual[key], f"{where}.{key}"))]
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where} (expected {len(expected)} items)"]
        return [found for index, (e, a) in enumerate(zip(expected, actual, strict=True))
                for found in subset_mismatches(e, a, f"{where}[{index}]")]
    return [] if expected == actual else [f"{where} ({actual!r}, expected {expected!r})"]

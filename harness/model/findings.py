"""Findings: what differs, how much it matters, and where.

A finding is about the target (its answer differs from the expectation, its stream breaks a
rule). When the harness itself cannot do its job (a broken scenario, a placeholder that
points nowhere), that is a `HarnessError` (`errors.py`), never a finding.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import IntEnum, StrEnum
from typing import Any


class Severity(IntEnum):
    NOTE = 0
    """Drift or a model-dependent difference: worth knowing, never a failure."""
    WARNING = 1
    """Differs from OpenAI in a way most clients survive."""
    ERROR = 2
    """Breaks a client or contradicts OpenAI."""

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def named(cls, text: str) -> Severity:
        """The severity a document names as `str` writes it (`note`, `warning`, `error`);
        `KeyError` for any other name."""
        return cls[text.upper()]


class Kind(StrEnum):
    """What differs; each kind checks one aspect of the contract (`aspect`)."""

    TRANSPORT = "transport"
    WIRE = "wire"
    STATUS = "status"
    ERROR_ENVELOPE = "error_envelope"
    RESPONSE_FIELD = "response_field"
    ITEMS = "items"
    INTERRUPT = "interrupt"
    EVENT_SEQUENCE = "event_sequence"
    STREAM_GRAMMAR = "stream_grammar"
    SCHEMA = "schema"
    UPSTREAM_REQUEST = "upstream_request"
    SECRET = "secret"
    VARIANT = "variant"

    @property
    def aspect(self) -> str:
        """The contract aspect this kind of finding checks, in words a summary can use."""
        return _ASPECTS[self]


_ASPECTS = {
    Kind.TRANSPORT: "answers arriving whole and in time",
    Kind.WIRE: "well-formed bytes (UTF-8, JSON, content types, event framing)",
    Kind.STATUS: "statuses (HTTP, and the Response's own)",
    Kind.ERROR_ENVELOPE: "error envelopes",
    Kind.RESPONSE_FIELD: "Response fields",
    Kind.ITEMS: "output items",
    Kind.INTERRUPT: "where the response stops for the client",
    Kind.EVENT_SEQUENCE: "stream event order",
    Kind.STREAM_GRAMMAR: "stream grammar",
    Kind.SCHEMA: "the openai SDK's schemas",
    Kind.UPSTREAM_REQUEST: "what reaches the model and the MCP servers",
    Kind.SECRET: "secrets never shown back",
    Kind.VARIANT: "end states where OpenAI's is not recorded",
}


class Rule(str):
    """A check's name: a family (`expect`, `golden`, `grammar`, `schema`, `wire`, ...) and a path
    below it, written `expect.error.code`. It is made from its parts where a check names itself,
    so nothing reads a rule's parts back out of its text; as text it compares, hashes and
    serialises as the name it writes."""

    family: str
    path: tuple[str, ...]

    def __new__(cls, family: str, path: tuple[str, ...] = ()) -> Rule:
        rule = super().__new__(cls, ".".join((family, *path)))
        rule.family, rule.path = family, tuple(path)
        return rule

    def __getnewargs__(self) -> tuple[str, tuple[str, ...]]:  # type: ignore[override]
        return self.family, self.path

    @classmethod
    def named(cls, text: str) -> Rule:
        """The rule a check declares by its written name (`grammar.sequence_numbers`)."""
        family, *path = text.split(".")
        return cls(family, tuple(path))

    @property
    def field(self) -> str | None:
        """The first part below the family: for an expectation's rule, the field it judges."""
        return self.path[0] if self.path else None

    def under(self, family: str) -> Rule:
        """The same check in another family (`expect.output` held against a golden: `golden.output`)."""
        return Rule(family, self.path)


@dataclass(frozen=True)
class Finding:
    kind: Kind
    severity: Severity
    rule: Rule
    """The check that produced it, e.g. `expect.output` or `grammar.sequence_numbers` (a check
    may name it as text; it is read once, here)."""
    message: str
    expected: Any = None
    actual: Any = None
    known: bool = False
    """The target's baseline lists this divergence: reported, but it fails nothing."""
    key: str | None = None
    """What the finding is, without where (event number, output index, ids): the same
    difference found in several places has one key. None: the message says it."""
    consequence: bool = False
    """Caused by the error its step's first finding quotes (`judge/cause.py`): reports fold it
    under that one."""

    def __post_init__(self) -> None:
        if not isinstance(self.rule, Rule):
            object.__setattr__(self, "rule", Rule.named(self.rule))

    @property
    def fails(self) -> bool:
        return self.severity >= Severity.ERROR and not self.known

    @property
    def group(self) -> tuple[str, str, str]:
        """Findings with the same group are the same difference: kind, rule, key."""
        return str(self.kind), self.rule, self.key or self.message

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kind"], data["severity"], data["rule"] = str(self.kind), str(self.severity), str(self.rule)
        return data


def group_of(finding: dict[str, Any]) -> tuple[str, str, str]:
    """`Finding.group` of a finding read back from a results document."""
    return finding["kind"], finding["rule"], finding.get("key") or finding["message"]

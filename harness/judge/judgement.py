"""The one judge: every path that judges an answer (a scenario step the engine ran, an exchange
the proxy relayed, an answer `parity replay` got, a capture `parity check-exchange` reads)
describes what it knows as a `Case` and calls `judge`. What a path does not know is left out of
its case and not judged; everything it knows is judged the same way everywhere.

The order of a judgement's findings: how the answer was delivered (its bytes, its transport);
then, only for an answer that arrived whole and can be read, the checks that need no reference
and how it differs from the step's expectation; what the engine found while running the step;
what reached the model and the MCP servers; then how it differs from a reference answer (a
golden set's, or a captured one). A step that failed on an error answer it did not expect gets
the gateway's own message first, with the findings it caused folded under it (`cause`). A
baseline marks the findings it knows last. CPU-bound on long streams, so the engine and the
proxy call it off the event loop.

A case with no expectation, nothing observed and no reference (the proxy, `check-exchange`)
is judged without loading the comparer, the scenario model or the fixtures it names:
`check-exchange` answers without them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..model.contract import Contract, is_chat_answer, project, project_chat
from ..model.findings import Finding
from ..wire.exchange import Exchange
from .checks import delivery_findings, no_reference_findings

if TYPE_CHECKING:
    from ..model.contract import StreamReference
    from ..model.observed import Observed
    from ..scenario.expectations import Expect
    from ..scenario.fixtures import McpFixture
    from .reference import Reference


@dataclass(frozen=True)
class Case:
    """One answer and what it is judged against; a part left out is not judged."""

    exchange: Exchange | None
    """None: the step sent nothing (what it waited for never held): only `found`, and what the
    scripted model could not answer as scripted, are judged."""
    chat: bool | None = None
    """Whether the answer is a chat completion; None: tell from the answer itself."""
    expect: Expect | None = None
    """The step's expectation, placeholders resolved (its `upstream` part is judged on `observed`)."""
    checks: bool = True
    """Whether the checks that need no reference run (not while polling for a state)."""
    current: bool = True
    """The answer came just now from a target, so a field the SDK requires and it lacks is a
    warning; otherwise it is traffic recorded earlier, and such a field is drift (a note)."""
    found: Sequence[Finding] = ()
    """What the engine found while running the step (`wait.until`, `poll.until`, `disconnect.when`)."""
    model_dependent: Sequence[str] = ()
    """The expectations a live model decides: how the answer differs from them is a note."""
    observed: Observed | None = None
    """What the step's request caused at the fixtures; None: not known (no scripted model)."""
    mcp: Mapping[str, McpFixture] = field(default_factory=dict)
    """The MCP fixtures of the run, to say whether a failed step's requests reached them."""
    reference: Reference | None = None
    """An earlier answer to hold this one against."""
    known: Callable[[Finding], bool] | None = None
    """Whether a baseline already knows a finding."""
    events_checked: int = 0
    """A stream's first events whose SDK schemas were checked as they arrived (the proxy's live
    checks, `live_checks.py`): not checked again."""


@dataclass(frozen=True)
class Judgement:
    contract: Contract | None
    """None when the case held the answer against nothing (the proxy, check-exchange), which
    needs no contract, or when the step sent nothing."""
    findings: list[Finding]
    reference: StreamReference | None = None
    """For a streamed answer, the sequence it is held against, for side-by-side views."""


def judge(case: Case) -> Judgement:
    """The contract of `case.exchange` and every finding of it (see the module's docstring)."""
    exchange = case.exchange
    if exchange is None:
        found = [*case.found, *(_upstream(case.observed) if case.observed is not None else [])]
        return Judgement(None, _marked(found, case.known))
    chat = is_chat_answer(exchange) if case.chat is None else case.chat
    readable = not (exchange.transport_error or exchange.unreadable)
    findings = delivery_findings(exchange)
    if readable and case.checks:
        findings += no_reference_findings(exchange, chat, current=case.current, events_checked=case.events_checked)
    if case.expect is None and case.observed is None and case.reference is None:
        return Judgement(None, _marked([*findings, *case.found], case.known))
    contract = project_chat(exchange) if chat else project(exchange)
    findings, reference = _held_to_what_is_known(case, exchange, contract, findings, chat=chat, readable=readable)
    return Judgement(contract, _marked(findings, case.known), reference)


def _upstream(observed: Observed) -> list[Finding]:
    from .compare import upstream_findings
    return upstream_findings(observed)


def _held_to_what_is_known(case: Case, exchange: Exchange, contract: Contract, findings: list[Finding], *,
                           chat: bool, readable: bool) -> tuple[list[Finding], StreamReference | None]:
    """The findings of a case with an expectation, what the fixtures observed or a reference,
    and the sequence a streamed answer is held against."""
    from ..model.contract import streamed_sequence
    from ..scenario.expectations import compare, compare_upstream
    from .cause import explained
    from .compare import model_dependent_as_notes, stream_reference
    from .reference import compared_with_reference

    if readable and case.expect is not None:
        findings = findings + compare(case.expect, contract, exchange)
    findings = model_dependent_as_notes([*findings, *case.found], case.model_dependent)
    if case.observed is not None:
        findings += _upstream(case.observed)
        if case.expect is not None and case.expect.upstream is not None:
            findings += compare_upstream(case.expect.upstream, case.observed)
    reference = stream_reference(case.expect, findings, streamed_sequence(contract) or (), chat) \
        if exchange.streamed and case.expect is not None else None
    if case.reference is not None and readable:
        differences, referenced = compared_with_reference(case.reference, contract, exchange)
        findings += differences
        reference = referenced or reference
    return explained(findings, exchange, case.expect, case.observed, case.mcp), reference


def _marked(findings: list[Finding], known: Callable[[Finding], bool] | None) -> list[Finding]:
    return findings if known is None else [replace(f, known=True) if known(f) else f for f in findings]

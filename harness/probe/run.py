"""A probe run: the probes sent to the target, then to what it is compared with (a target, or
recorded answers and the reference gateway for the probes they lack), one side at a time
(a gateway profile is started for its side and stopped before the other starts)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..defaults import REFERENCE
from ..engine.session import OPENAI, open_session
from ..engine.stack_process import APART_FROM_PROBES
from ..engine.targets import unreachable
from ..errors import HarnessError
from ..options import TargetOptions
from ..scenario.capabilities import API_CAPABILITIES, MEANING, body_capabilities
from ..wire.redaction import Redactor
from .answers import Recorded, read_answers, write_answers
from .compare import Comparison
from .generate import Probe
from .send import OnProgress, Outcome, send_probes

REFERENCE_SOURCE = "the reference gateway"
"""How an expectation taken from the reference gateway is named: the spec where OpenAI is not
recorded."""
DESCRIPTION_SOURCE = "OpenAI's description"
"""How an expectation is named where the reference gateway refused for a limit of its own."""
PROBED_GATEWAY: dict[str, Any] = {"chat_hosted_tools": ({"type": "web_search"},)}
"""The settings of a reference gateway the probes start: a hosted tool on the chat surface, so
a chat completion runs through its loop and is checked as OpenAI checks it (without one it
passes through to the model unchecked)."""
_OWN_WORDS = re.compile(r"^(The reference gateway|This gateway) ")


def source_name(target: str, recorded: bool = False) -> str:
    """How the report names where an expectation came from."""
    if target == REFERENCE and not recorded:
        return REFERENCE_SOURCE
    name = "OpenAI" if target == OPENAI else target
    return f"{name} (recorded)" if recorded else name


def own_limit(outcome: Outcome) -> bool:
    """Whether the reference gateway refused for a limit of its own (a tool or an input item it
    does not run, a setting it lacks), which says nothing of what OpenAI answers."""
    return outcome.status_class == "4xx" and (outcome.code == "unsupported_value" or
                                              _OWN_WORDS.match(outcome.detail) is not None)


def described(probe: Probe) -> Outcome:
    """OpenAI's description of the request as an expectation: a 400 whose code and param it
    does not say, or an answer."""
    if probe.refused:
        return Outcome(400, "envelope", "invalid_request_error", unsaid=frozenset({"code", "param"}),
                       detail="OpenAI's description refuses it")
    return Outcome(200, "json", detail="OpenAI's description accepts it")


def lacked(probe: Probe, lacks: Mapping[str, str]) -> str | None:
    """Why a target whose profile says it lacks `lacks` is not sent the probe, or None."""
    needs = body_capabilities(probe.body) | ({API_CAPABILITIES[probe.endpoint]} if probe.endpoint in API_CAPABILITIES
                                             else set())
    return next((f"the probe {MEANING[capability]}; the target lacks that" for capability in sorted(needs)
                 if capability in lacks), None)


def answers_of(options: TargetOptions, probes: Sequence[Probe], *, jobs: int, redactor: Redactor,
               say: Callable[[str], None] = lambda line: None, progress: OnProgress = lambda what, done, total: None
               ) -> tuple[str, dict[str, Outcome], dict[str, str]]:
    """The target's name, its outcome of each probe it was sent (`progress` told as they come),
    and why the others were not (its profile says it lacks what they need): what the target
    needs is started for the probes and stopped after. `HarnessError` when it cannot be started
    or reached."""
    with open_session(options, (), say, redactor, gateway=PROBED_GATEWAY, apart=len(probes) >= APART_FROM_PROBES) \
            as session:
        target = session.target
        if (why := asyncio.run(unreachable(target))) is not None:
            raise HarnessError(f"the target {target.name} at {target.base_url} is unreachable: {why}")
        skipped = {probe.id: reason for probe in probes if (reason := lacked(probe, target.lacks)) is not None}
        sent = [probe.id for probe in probes if probe.id not in skipped]
        say(f"sending {len(sent)} probes to {target.name}" + (f" ({len(skipped)} need what it lacks)" if skipped
                                                            else "") + " ...")
        upstream = session.stack.upstream_url if session.stack is not None else None
        outcomes = asyncio.run(send_probes(target, sent, upstream_url=upstream, jobs=jobs, progress=progress))
        return target.name, outcomes, skipped


def run_probes(options: TargetOptions, against: str, probes: Sequence[Probe], *, jobs: int, redactor: Redactor,
               record: Path | None = None, say: Callable[[str], None] = lambda line: None,
               progress: OnProgress = lambda what, done, total: None) -> Comparison:
    """The probes sent to `options.target` and compared with `against`: a target (`reference`,
    a URL, a profile) or a folder of recorded answers, the reference gateway answering the
    probes it lacks. Where the reference gateway refused for a limit of its own, OpenAI's
    description is the expectation. With `record`, the target's answers are kept there too;
    `progress` is told how far each side's sending has come."""
    recorded = read_answers(Path(against)) if Path(against).is_dir() else None
    name, got, skipped = answers_of(options, probes, jobs=jobs, redactor=redactor, say=say, progress=progress)
    if record is not None:
        say(f"recorded {len(got)} answers of {name} in {write_answers(record, options.target, got, redactor)}")
    sent = [probe for probe in probes if probe.id in got]
    expected: dict[str, Outcome] = {}
    sources: dict[str, str] = {}
    if recorded is not None:
        expected, sources = _recorded_expectations(recorded, sent)
        say(f"{len(expected)} of {len(sent)} probes have answers recorded in {against}")
    if missing := [probe for probe in sent if probe.id not in expected]:
        compared = TargetOptions(target=against if recorded is None else REFERENCE, timeout_s=options.timeout_s,
                                 upstream=options.upstream, profile_dirs=options.profile_dirs)
        other, answers, _ = answers_of(compared, missing, jobs=jobs, redactor=redactor, say=say,
                                          progress=progress)
        for probe in missing:
            if other == REFERENCE and own_limit(answers[probe.id]):
                expected[probe.id], sources[probe.id] = described(probe), DESCRIPTION_SOURCE
            else:
                expected[probe.id], sources[probe.id] = answers[probe.id], source_name(other)
    against_name = source_name(recorded.target, recorded=True) if recorded is not None else source_name(against)
    return Comparison(name, against_name, sent, got, expected, sources, skipped)


def _recorded_expectations(recorded: Recorded, probes: Sequence[Probe]) -> tuple[dict[str, Outcome], dict[str, str]]:
    source = source_name(recorded.target, recorded=True)
    found = {probe.id: recorded.outcomes[probe.id] for probe in probes if probe.id in recorded.outcomes}
    return found, dict.fromkeys(found, source)

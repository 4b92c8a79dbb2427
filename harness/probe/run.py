"""A probe run: the probes sent to the target, then to what it is compared with (a target, or
recorded answers and the reference gateway for the probes they lack), one side at a time
(a gateway profile is started for its side and stopped before the other starts)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..defaults import REFERENCE
from ..engine.session import OPENAI, open_session
from ..engine.targets import unreachable
from ..errors import HarnessError
from ..options import TargetOptions
from ..wire.redaction import Redactor
from .answers import Recorded, read_answers, write_answers
from .compare import Comparison
from .generate import Probe
from .send import Outcome, send_probes

REFERENCE_SOURCE = "the reference gateway"
"""How an expectation taken from the reference gateway is named: the spec where OpenAI is not
recorded."""
PROBED_GATEWAY: dict[str, Any] = {"chat_hosted_tools": ({"type": "web_search"},)}
"""The settings of a reference gateway the probes start: a hosted tool on the chat surface, so
a chat completion runs through its loop and is checked as OpenAI checks it (without one it
passes through to the model unchecked)."""


def source_name(target: str, recorded: bool = False) -> str:
    """How the report names where an expectation came from."""
    if target == REFERENCE and not recorded:
        return REFERENCE_SOURCE
    name = "OpenAI" if target == OPENAI else target
    return f"{name} (recorded)" if recorded else name


def answers_of(options: TargetOptions, probes: Sequence[Probe], *, jobs: int, redactor: Redactor,
               say: Callable[[str], None] = lambda line: None) -> tuple[str, dict[str, Outcome]]:
    """The target's name and its outcome of each probe: what the target needs is started for
    the probes and stopped after. `HarnessError` when it cannot be started or reached."""
    with open_session(options, (), say, redactor, gateway=PROBED_GATEWAY) as session:
        target = session.target
        if (why := asyncio.run(unreachable(target))) is not None:
            raise HarnessError(f"the target {target.name} at {target.base_url} is unreachable: {why}")
        say(f"sending {len(probes)} probes to {target.name} ...")
        upstream = session.stack.upstream_url if session.stack is not None else None
        outcomes = asyncio.run(send_probes(target, [probe.id for probe in probes], upstream_url=upstream, jobs=jobs))
        return target.name, outcomes


def run_probes(options: TargetOptions, against: str, probes: Sequence[Probe], *, jobs: int, redactor: Redactor,
               record: Path | None = None, say: Callable[[str], None] = lambda line: None) -> Comparison:
    """The probes sent to `options.target` and compared with `against`: a target (`reference`,
    a URL, a profile) or a folder of recorded answers, the reference gateway answering the
    probes it lacks. With `record`, the target's answers are kept there too."""
    recorded = read_answers(Path(against)) if Path(against).is_dir() else None
    name, got = answers_of(options, probes, jobs=jobs, redactor=redactor, say=say)
    if record is not None:
        say(f"recorded {len(got)} answers of {name} in {write_answers(record, options.target, got, redactor)}")
    expected: dict[str, Outcome] = {}
    sources: dict[str, str] = {}
    if recorded is not None:
        expected, sources = _recorded_expectations(recorded, probes)
        say(f"{len(expected)} of {len(probes)} probes have answers recorded in {against}")
    if missing := [probe for probe in probes if probe.id not in expected]:
        compared = TargetOptions(target=against if recorded is None else REFERENCE, timeout_s=options.timeout_s,
                                 upstream=options.upstream, profile_dirs=options.profile_dirs)
        other, answers = answers_of(compared, missing, jobs=jobs, redactor=redactor, say=say)
        expected |= answers
        sources |= dict.fromkeys(answers, source_name(other))
    against_name = source_name(recorded.target, recorded=True) if recorded is not None else source_name(against)
    return Comparison(name, against_name, list(probes), got, expected, sources)


def _recorded_expectations(recorded: Recorded, probes: Sequence[Probe]) -> tuple[dict[str, Outcome], dict[str, str]]:
    source = source_name(recorded.target, recorded=True)
    found = {probe.id: recorded.outcomes[probe.id] for probe in probes if probe.id in recorded.outcomes}
    return found, dict.fromkeys(found, source)

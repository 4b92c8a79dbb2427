"""Every generated probe (`parity probe`'s full set, every endpoint family) against the reference
gateway: no 5xx, no answer missing, every 4xx in OpenAI's error envelope, nothing accepted that
OpenAI's description refuses; the figures per family and the run time are printed.

It sends over 10,000 requests (about 40 s on a quiet two-core machine), so the default `pytest`
leaves it out (the seeded share in test_probe.py and the property tests per family run there);
CI runs it as a step of its own: `pytest -m full_probe_set tests/harness/test_probe_full_set.py`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from responses_parity.harness.defaults import DEFAULT_MODEL
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.targets import Target
from responses_parity.harness.probe.generate import all_probes
from responses_parity.harness.probe.send import BASE_INPUT, send_probes
from responses_parity.harness.probe.verdict import family_lines, problems

pytestmark = pytest.mark.full_probe_set
JOBS = 8


def test_the_reference_gateway_answers_every_generated_probe_as_openais_description_allows(
        stack: Stack, probed_gateway: str, record_figure: Callable[[str], None]) -> None:
    probes = all_probes(DEFAULT_MODEL, BASE_INPUT)
    started = time.monotonic()
    outcomes = asyncio.run(send_probes(Target("reference", probed_gateway, timeout_s=60), [p.id for p in probes],
                                       upstream_url=stack.upstream_url, jobs=JOBS))
    elapsed = time.monotonic() - started
    found = problems(probes, outcomes)
    statuses = [outcome.status for outcome in outcomes.values()]
    record_figure(f"full probe set against the reference gateway: {len(probes)} probes in {elapsed:.0f} s "
                  f"({JOBS} at a time): {sum(s is not None and s >= 500 for s in statuses)} 5xx, "
                  f"{sum(p.kind.startswith('4xx') for p in found)} 4xx without OpenAI's envelope, "
                  f"{sum(p.kind.startswith('accepted') for p in found)} accepted that OpenAI's description refuses")
    for line in family_lines(probes, outcomes, found):
        record_figure(f"  {line}")
    assert [problem.line() for problem in found] == []

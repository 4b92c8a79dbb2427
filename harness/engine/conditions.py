"""Waiting for a condition on the fixtures instead of sleeping: `wait.until` before a step,
`disconnect.when` during one. The run's fixture logs are read every few milliseconds until
the condition holds or its deadline passes, so a slow or loaded machine only makes the wait
longer, never the verdict different.
"""

from __future__ import annotations

import asyncio
import time

from ..model.observed import Observed
from ..scenario.expectations import compare_upstream
from ..scenario.model import Until
from .fixture_client import FixtureClient

CHECK_INTERVAL_S = 0.02


def unmet(until: Until, observed: Observed, quiet_for: float) -> str | None:
    """What of `until` does not hold (None when all of it does); `quiet_for` is how long the
    fixtures have seen nothing new with nothing in flight."""
    if until.upstream is not None and (findings := compare_upstream(until.upstream, observed)):
        return "; ".join(finding.message for finding in findings)
    if until.quiet is not None and quiet_for < until.quiet:
        return (f"the fixtures were not quiet for {until.quiet:g}s (a request reached them or was in flight "
                f"{quiet_for:.2f}s before the deadline)")
    return None


async def wait_until(fixtures: FixtureClient, run: str, mcp_names: list[str], until: Until,
                     timeout_s: float) -> str | None:
    """Wait until `until` holds for the run; None once it does, else what still did not hold
    when `timeout_s` had passed."""
    deadline = time.monotonic() + timeout_s
    quiet_since = time.monotonic()
    last_progress: tuple[int, ...] | None = None
    while True:
        observed = await fixtures.observed(run, mcp_names)
        now = time.monotonic()
        if observed.progress != last_progress or observed.in_flight:
            quiet_since, last_progress = now, observed.progress
        missing = unmet(until, observed, now - quiet_since)
        if missing is None or now >= deadline:
            return missing
        await asyncio.sleep(CHECK_INTERVAL_S)

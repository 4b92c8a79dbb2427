"""Scripting the upstream model for a test run, and reading what the gateway sent it."""

from __future__ import annotations

from typing import Any

import httpx2

from responses_parity.fixtures.upstream.script import RunScript, new_run_token
from responses_parity.harness.engine.stack import Stack


def scripted(stack: Stack, *steps: list[dict[str, Any]], run: str | None = None) -> str:
    """A run (fresh unless given) of these steps' model turns, every step continuing the first
    one's chain."""
    run = run or new_run_token()
    script = RunScript.model_validate({"steps": list(steps), "chain_of": [0] * len(steps)})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    return run


def upstream_requests(stack: Stack, run: str) -> list[dict[str, Any]]:
    """What the upstream recorded of each model request of the run."""
    return httpx2.get(f"{stack.upstream_url}/__parity/runs/{run}").json()["requests"]

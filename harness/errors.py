"""`HarnessError`: the harness could not do its job as written: a broken scenario, a
placeholder that points nowhere, a target that cannot be started. Never a finding, which is
about the target (`model/findings.py`). An error about a name that names nothing (a field, a
scenario id, a target) ends with `did_you_mean`."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class HarnessError(Exception):
    """The harness could not run something as written (not a fault of the target)."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the known name closest to `name`, or nothing when none is close."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""

"""`HarnessError`: the harness could not do its job as written: a broken scenario, a
placeholder that points nowhere, a target that cannot be started. Never a finding, which is
about the target (`model/findings.py`)."""

from __future__ import annotations


class HarnessError(Exception):
    """The harness could not run something as written (not a fault of the target)."""

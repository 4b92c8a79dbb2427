"""The findings of the conditions a step states for how it runs, which the engine finds while it
runs the step (and hands to the judge with its answer): what it waited for (`wait.until`),
polled for (`poll.until`) or was to go away on (`disconnect.when`) never held; and an
`expect.upstream` that cannot be checked, the model not being the scripted one."""

from __future__ import annotations

from dataclasses import replace

from ..model.findings import Finding, Kind, Severity


def waited_in_vain(timeout: float, missing: str) -> Finding:
    return Finding(Kind.UPSTREAM_REQUEST, Severity.ERROR, "wait.until",
                   f"waited {timeout:g}s for `wait.until`, which never held: {missing}")


def polled_in_vain(timeout: float, miss: Finding) -> Finding:
    """`miss`: the first way the last answer polled differs from `poll.until`."""
    return replace(miss, rule="poll.until", message=f"polled for {timeout:g}s and the answer never matched "
                                                    f"`poll.until`: {miss.message}")


def over_before_disconnect() -> Finding:
    return Finding(Kind.UPSTREAM_REQUEST, Severity.ERROR, "disconnect.when",
                   "the answer was over before the client was to go away: "
                   "`disconnect.when` never held while it was in flight")


def upstream_not_checked() -> Finding:
    """A step states `expect.upstream` against a target whose model is not scripted."""
    return Finding(Kind.UPSTREAM_REQUEST, Severity.NOTE, "expect.upstream",
                   "not checked: what reached the model is known only with the scripted one")

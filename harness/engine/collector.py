"""The garbage collector's settings for a process of the harness's own that runs or serves.

Once a process has imported the gateway, the fixtures and the SDKs, it holds about 110,000
objects that live as long as it does. CPython's collector walks all of them in every full
collection (70 ms here) and in each of the several collections of the interpreter's teardown
(0.2 s of a one-scenario `parity run`), and its youngest generation is collected every 700
allocations, several times for each request a gateway answers. `settle` freezes what exists
(no collection walks it again) and lets the youngest generation grow to `YOUNG_OBJECTS` first.
Measured on the reference gateway, alternating runs: CPU per plain request 0.94x with the
freeze alone, about 0.88x with both (a larger threshold, 50,000, gained nothing more).

Only the commands that own their process call it (`parity run`, `record`, `matrix`, `probe`,
`serve`, `proxy` and a run's server process), never code that runs inside a user's pytest.
"""

from __future__ import annotations

import gc

YOUNG_OBJECTS = 10_000
"""Allocations (less frees) between two collections of the youngest generation (CPython: 700)."""


def settle() -> None:
    """Freeze every object that exists now out of the collector's walks, and collect the
    youngest generation less often. Call it once the process has imported what it runs."""
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, middle, oldest)

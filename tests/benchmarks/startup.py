"""Benchmark: what the harness costs before it does anything. Times, as whole processes in
interleaved rounds: a bare `python -c "import pytest"` (the floor) against the same with the
pytest plugin's entry point imported (what installing the package adds to every pytest run),
`parity --version`, and `parity check-exchange` on one small exchange, with the SDK schema
cache warm and cold (an empty `PARITY_CACHE_DIR` each time). With `--python NAME=PATH` it
times each interpreter's installed responses-parity (a checkout before and after a change, in
virtual environments of their own) in the same rounds. Prints the median and range of each,
the plugin's median cost over the floor, and each variant's median ratio to the first
interpreter's, paired round by round.

    python tests/benchmarks/startup.py [--rounds N] [--python before=/other/.venv/bin/python --python after=...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXCHANGE = Path(__file__).resolve().parents[1] / "harness" / "exchanges" / "error-429-insufficient-quota.json"
FLOOR, PLUGIN, WARM, COLD = "floor: import pytest", "import pytest + the plugin", "warm", "cold"


def _commands(python: str) -> dict[str, list[str]]:
    parity = [python, "-m", "responses_parity.harness"]
    return {FLOOR: [python, "-c", "import pytest"],
            PLUGIN: [python, "-c", "import pytest, responses_parity.harness.pytest_plugin"],
            "parity --version": [*parity, "--version"],
            f"parity check-exchange, {WARM} cache": [*parity, "check-exchange", str(EXCHANGE)],
            f"parity check-exchange, {COLD} cache": [*parity, "check-exchange", str(EXCHANGE)]}


def _wall(command: list[str], cache: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=False, capture_output=True, env=os.environ | {"PARITY_CACHE_DIR": str(cache)})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--python", action="append", default=[], metavar="NAME=PATH",
                        help="An interpreter whose installed responses-parity to time (repeatable; default: this one).")
    args = parser.parse_args()
    pythons = [entry.partition("=")[::2] for entry in args.python] or [("this", sys.executable)]
    runs = {(who, name): command for who, python in pythons for name, command in _commands(python).items()}
    times: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    with tempfile.TemporaryDirectory() as folder:
        warm = Path(folder) / "warm"
        for command in runs.values():  # warm the file cache and the schema cache
            _wall(command, warm)
        for round_index in range(args.rounds):
            for (who, name), command in runs.items():
                cache = Path(folder) / f"cold-{round_index}-{who}" if COLD in name else warm
                times[who, name].append(_wall(command, cache))
    print(f"start-up, wall seconds over {args.rounds} interleaved rounds: median (min-max)"
          + (f", ratio to {pythons[0][0]} (median of paired rounds)" if len(pythons) > 1 else ""))
    for (who, name), walls in times.items():
        first = times[pythons[0][0], name]
        ratio = statistics.median(mine / theirs for mine, theirs in zip(walls, first, strict=True))
        label = f"{who}: {name}" if len(pythons) > 1 else name
        print(f"  {label:50} {statistics.median(walls):6.3f} "
              f"({min(walls):.3f}-{max(walls):.3f})" + (f"  x{ratio:.2f}" if len(pythons) > 1 else ""))
    for who, _ in pythons:
        added = [plugin - floor for plugin, floor in zip(times[who, PLUGIN], times[who, FLOOR], strict=True)]
        print(f"{who + ': ' if len(pythons) > 1 else ''}the plugin adds to a pytest start-up: "
              f"median {statistics.median(added) * 1000:.0f} ms (paired)")


if __name__ == "__main__":
    main()

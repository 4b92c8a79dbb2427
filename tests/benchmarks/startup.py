"""Benchmark: what the harness costs before it does anything. Times, as whole processes in
interleaved rounds: a bare `python -c "import pytest"` (the floor) against the same with the
pytest plugin's entry point imported (what installing the package adds to every pytest run),
a one-test pytest run in a fresh project folder with the plugin and with `-p
no:responses_parity` (the whole cost of the installed plugin to a project that does not use
it; the goal is within 0.1 s), `parity --version`, and `parity check-exchange` on one small
exchange, with the SDK schema cache warm and cold (an empty `PARITY_CACHE_DIR` each time).
With `--python NAME=PATH` it times each interpreter's installed responses-parity (a checkout
before and after a change, in virtual environments of their own) in the same rounds. Prints
the median and range of each, the plugin's median cost over the floor and over the run
without it, and each variant's median ratio to the first interpreter's, paired round by round.

    python tests/benchmarks/startup.py [--rounds N] [--python before=/other/.venv/bin/python --python after=...]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXCHANGE = Path(__file__).resolve().parents[1] / "harness" / "exchanges" / "error-429-insufficient-quota.json"
FLOOR, PLUGIN, WARM, COLD = "floor: import pytest", "import pytest + the plugin", "warm", "cold"
ONE_TEST, ONE_TEST_WITHOUT = "one-test pytest run", "one-test pytest run, -p no:responses_parity"
_TIMING = re.compile(r" in \d+\.\d+s\b")


def fresh_project(folder: Path) -> Path:
    """A project folder that knows nothing of responses-parity: one test file, no configuration."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    return folder


def one_test_run(python: str, with_plugin: bool = True) -> list[str]:
    """pytest on the fresh project's one test (run in its folder), with the plugin or without."""
    return [python, "-m", "pytest", "-p", "no:cacheprovider", *([] if with_plugin else ["-p", "no:responses_parity"])]


def without_timing(output: str) -> str:
    """pytest's output without what differs from run to run or names the plugin: the duration
    and the plugin's entry in the list of plugins."""
    return re.sub(r"responses-parity-[^,\s]+(, )?", "", _TIMING.sub(" in <time>", output))


def _commands(python: str) -> dict[str, list[str]]:
    parity = [python, "-m", "responses_parity.harness"]
    return {FLOOR: [python, "-c", "import pytest"],
            PLUGIN: [python, "-c", "import pytest, responses_parity.harness.pytest_plugin"],
            ONE_TEST: one_test_run(python),
            ONE_TEST_WITHOUT: one_test_run(python, with_plugin=False),
            "parity --version": [*parity, "--version"],
            f"parity check-exchange, {WARM} cache": [*parity, "check-exchange", str(EXCHANGE)],
            f"parity check-exchange, {COLD} cache": [*parity, "check-exchange", str(EXCHANGE)]}


def _wall(command: list[str], cache: Path, project: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=False, capture_output=True, cwd=project,
                   env=os.environ | {"PARITY_CACHE_DIR": str(cache)})
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
        warm, project = Path(folder) / "warm", fresh_project(Path(folder) / "project")
        for command in runs.values():  # warm the file cache and the schema cache
            _wall(command, warm, project)
        for round_index in range(args.rounds):
            for (who, name), command in runs.items():
                cache = Path(folder) / f"cold-{round_index}-{who}" if COLD in name else warm
                times[who, name].append(_wall(command, cache, project))
    print(f"start-up, wall seconds over {args.rounds} interleaved rounds: median (min-max)"
          + (f", ratio to {pythons[0][0]} (median of paired rounds)" if len(pythons) > 1 else ""))
    for (who, name), walls in times.items():
        first = times[pythons[0][0], name]
        ratio = statistics.median(mine / theirs for mine, theirs in zip(walls, first, strict=True))
        label = f"{who}: {name}" if len(pythons) > 1 else name
        print(f"  {label:50} {statistics.median(walls):6.3f} "
              f"({min(walls):.3f}-{max(walls):.3f})" + (f"  x{ratio:.2f}" if len(pythons) > 1 else ""))
    for who, _ in pythons:
        prefix = who + ": " if len(pythons) > 1 else ""
        pairs = {"the plugin's import adds to a pytest start-up": (PLUGIN, FLOOR),
                 "the installed plugin adds to a one-test run (goal: 100 ms)": (ONE_TEST, ONE_TEST_WITHOUT)}
        for label, (mine, theirs) in pairs.items():
            added = [a - b for a, b in zip(times[who, mine], times[who, theirs], strict=True)]
            print(f"{prefix}{label}: median {statistics.median(added) * 1000:.0f} ms (paired)")


if __name__ == "__main__":
    main()

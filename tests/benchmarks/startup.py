"""Benchmark: what the harness costs before it does anything. Times, as whole processes in
interleaved rounds, a bare `python -c "import pytest"` (the floor) against the same with the
pytest plugin's entry point imported (what installing the package adds to every pytest run),
`parity --version`, and `parity check-exchange` on one small exchange; prints the median and
range of each and the plugin's median cost over the floor, paired round by round.

    python tests/benchmarks/startup.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXCHANGE = Path(__file__).resolve().parents[1] / "harness" / "exchanges" / "error-429-insufficient-quota.json"
COMMANDS = {
    "floor: import pytest": [sys.executable, "-c", "import pytest"],
    "import pytest + the plugin": [sys.executable, "-c", "import pytest, responses_parity.harness.pytest_plugin"],
    "parity --version": [sys.executable, "-m", "responses_parity.harness", "--version"],
    "parity check-exchange (1 file)": [sys.executable, "-m", "responses_parity.harness", "check-exchange",
                                       str(EXCHANGE)],
}


def _wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=False, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    for command in COMMANDS.values():  # warm the file cache
        _wall(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.rounds):
        for name, command in COMMANDS.items():
            times[name].append(_wall(command))
    print(f"start-up, wall seconds over {args.rounds} interleaved rounds: median (min-max)")
    for name, walls in times.items():
        print(f"  {name:34} {statistics.median(walls):6.3f} ({min(walls):.3f}-{max(walls):.3f})")
    added = [plugin - floor for plugin, floor in zip(times["import pytest + the plugin"],
                                                     times["floor: import pytest"], strict=True)]
    print(f"the plugin adds to a pytest start-up: median {statistics.median(added) * 1000:.0f} ms (paired)")


if __name__ == "__main__":
    main()

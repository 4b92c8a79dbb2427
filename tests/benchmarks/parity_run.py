"""Benchmark: wall time and peak memory of `parity run` over the whole built-in suite, for one
or more variants (an interpreter, i.e. a checkout installed in its own virtual environment,
times a `--jobs` value) run in interleaved rounds, so a machine that gets busier or quieter
weighs on every variant alike. Prints each variant's median and range, and its median ratio to
the first variant, paired round by round; a run that does not pass (exit 0) is counted.

    python tests/benchmarks/parity_run.py [--rounds N] [--jobs 2,4] [--python before=/other/.venv/bin/python]

It asserts nothing (speed is measured here, never in tests).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Variant:
    name: str
    python: str
    jobs: int


@dataclass(frozen=True)
class Timing:
    wall_s: float
    peak_mib: float
    passed: bool


def _run(variant: Variant, reports: Path) -> Timing:
    started = time.perf_counter()
    process = subprocess.Popen([variant.python, "-m", "responses_parity.harness", "run", "--jobs", str(variant.jobs),
                                "--report-dir", str(reports)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return Timing(wall, usage.ru_maxrss / 1024, process.returncode == 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", default="4", help="Comma-separated --jobs values to compare.")
    parser.add_argument("--python", action="append", default=[], metavar="NAME=PATH",
                        help="An interpreter whose installed responses-parity to run (repeatable; default: this one).")
    args = parser.parse_args()
    pythons = [entry.partition("=")[::2] for entry in args.python] or [("this", sys.executable)]
    variants = [Variant(f"{name} --jobs {jobs}", path, int(jobs))
                for name, path in pythons for jobs in args.jobs.split(",")]
    times: dict[Variant, list[Timing]] = {variant: [] for variant in variants}
    with tempfile.TemporaryDirectory() as reports:
        for round_index in range(args.rounds):
            shift = round_index % len(variants)
            for variant in variants[shift:] + variants[:shift]:
                times[variant].append(_run(variant, Path(reports)))
    first = variants[0]
    print(f"parity run over the built-in suite, {args.rounds} interleaved rounds: wall seconds median (min-max), "
          f"ratio to {first.name!r} (median of paired rounds), peak RSS")
    for variant, timings in times.items():
        walls = [timing.wall_s for timing in timings]
        ratios = [mine.wall_s / theirs.wall_s for mine, theirs in zip(timings, times[first], strict=True)]
        failed = sum(not timing.passed for timing in timings)
        print(f"  {variant.name:28} {statistics.median(walls):6.2f} ({min(walls):.2f}-{max(walls):.2f})  "
              f"x{statistics.median(ratios):.2f}  {max(timing.peak_mib for timing in timings):4.0f} MiB"
              + (f"  {failed} run(s) did not pass" if failed else ""))


if __name__ == "__main__":
    main()

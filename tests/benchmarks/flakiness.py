"""Benchmark: does the suite give the same verdict on a loaded machine? Runs every built-in
scenario in both stream modes N times (`parity run` against the embedded reference gateway)
while a CPU hog keeps every core busy, and prints the failures per scenario and mode.

    python tests/benchmarks/flakiness.py [--runs N] [--jobs J] [--hogs H] [--reports DIR] [-- extra parity run args]

A scenario that fails once in ten runs is a bug to find at its cause. It prints figures and
exits 1 when any run failed; it is not part of the default test run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from responses_parity.harness.engine import child_process
from responses_parity.harness.engine.child_process import ChildProcess

SPIN = [sys.executable, "-c", "while True: pass"]
"""A CPU hog: a `ChildProcess`, so that it ends with the benchmark even when this is killed."""


def _run(report_dir: Path, jobs: int, extra: list[str]) -> tuple[float, dict[str, object]]:
    started = time.perf_counter()
    child_process.run([sys.executable, "-m", "responses_parity.harness", "run", "--jobs", str(jobs),
                       "--report-dir", str(report_dir), *extra], capture_output=True)
    elapsed = time.perf_counter() - started
    results = report_dir / "results.json"
    return elapsed, json.loads(results.read_text()) if results.exists() else {}


def _first_problem(unit: dict[str, object]) -> str:
    for step in unit["steps"]:  # type: ignore[union-attr]
        if step["error"]:
            return f"{step['step']}: could not run: {step['error']}"
        for finding in step["findings"]:
            if finding["severity"] == "error" and not finding["known"]:
                return f"{step['step']}: {finding['message']}"
    return "(no finding)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=4, help="parity run --jobs")
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="busy processes (default: one a core)")
    parser.add_argument("--reports", type=Path, default=None,
                        help="keep each run's reports in DIR/<run> (default: a temporary folder, removed)")
    parser.add_argument("extra", nargs="*", help="more `parity run` arguments (after --)")
    args = parser.parse_args()
    hogs = [ChildProcess(SPIN, stdin=subprocess.DEVNULL) for _ in range(args.hogs)]
    failures: Counter[tuple[str, str]] = Counter()
    examples: dict[tuple[str, str], str] = {}
    times, units = [], 0
    try:
        with tempfile.TemporaryDirectory() as temporary:
            reports = args.reports or Path(temporary)
            for number in range(1, args.runs + 1):
                elapsed, document = _run(reports / str(number), args.jobs, args.extra)
                times.append(elapsed)
                results = document.get("results", [])
                units = len(results)  # type: ignore[arg-type]
                failed = [u for u in results if u["outcome"] in ("fail", "could_not_run")]  # type: ignore[union-attr]
                for unit in failed:
                    key = (unit["scenario"], unit["mode"])
                    failures[key] += 1
                    examples.setdefault(key, _first_problem(unit))
                state = "no report" if not document else f"{len(failed)} of {units} failed"
                print(f"run {number}/{args.runs}: {elapsed:.1f}s, {state}", flush=True)
    finally:
        for hog in hogs:
            hog.stop()
    print(f"\n{args.runs} runs of {units} scenario runs, jobs={args.jobs}, {args.hogs} busy process(es) on "
          f"{os.cpu_count()} core(s); wall time median {statistics.median(times):.1f}s "
          f"(min {min(times):.1f}s, max {max(times):.1f}s)")
    if not failures:
        print("no failures")
        return
    print(f"{sum(failures.values())} failure(s):")
    for (scenario, mode), count in failures.most_common():
        print(f"  {scenario} [{mode}]: {count}/{args.runs}  e.g. {examples[(scenario, mode)]}")
    sys.exit(1)


if __name__ == "__main__":
    main()

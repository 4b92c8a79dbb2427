"""Benchmark: wall time and peak memory of `parity run` over the whole built-in suite.

    python tests/benchmarks/parity_run.py [--repeat N] [--jobs J]

Prints figures; it asserts nothing (speed is measured here, never in tests).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=4)
    args = parser.parse_args()
    times = []
    units = 0
    with tempfile.TemporaryDirectory() as reports:
        for _ in range(args.repeat):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "responses_parity.harness", "run", "--jobs", str(args.jobs),
                            "--report-dir", reports], check=False, capture_output=True)
            times.append(time.perf_counter() - started)
            units = json.loads((Path(reports) / "results.json").read_text())["summary"]["units"]
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"parity run: {units} scenario runs, jobs={args.jobs}, repeat={args.repeat}")
    print(f"  wall time: median {statistics.median(times):.2f}s, min {min(times):.2f}s, max {max(times):.2f}s")
    print(f"  per scenario run: {statistics.median(times) / max(units, 1) * 1000:.0f} ms (median run)")
    print(f"  peak RSS of one run: {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()

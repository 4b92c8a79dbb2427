"""Benchmark: what each way of misbehaving costs the harness. For every behaviour of the
hostile target (tests/harness/hostile_target.py), runs `parity run` on one plain text scenario
in its own process and prints its wall time and peak resident memory, beside a well-behaved
run (the embedded reference gateway) for the floor of memory.

    python tests/benchmarks/hostile_targets.py [--timeout S] [--runs N] [--mode stream|nonstream]

The bound it checks: no run outlives its timeout by more than 2 s (beyond the start-up and
reporting every run has: the quickest run's wall time), nor grows more than 300 MB above the
well-behaved run's peak memory. It prints figures and exits 1 when a run breaks the bound; it
is not part of the default test run.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))

from hostile_target import BEHAVIOURS, SCENARIO, HostileTarget

from responses_parity.harness.engine.stack import Stack

SLACK_S, SLACK_MB = 2.0, 300.0
FLOOR = "(floor: the reference gateway)"


def _measure(target: str, upstream: str, mode: str, timeout: float, folder: Path) -> tuple[float, float]:
    """Wall seconds and peak resident MB of one `parity run` process."""
    command = [sys.executable, "-m", "responses_parity.harness", "run", str(folder / "scenarios"), "--target",
               target, "--mode", mode, "--timeout", str(timeout), "--report-dir", str(folder / "reports")]
    if target != "reference":
        command += ["--upstream", upstream]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0  # reaped by wait4
    return time.perf_counter() - started, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, default=5.0, help="parity run --timeout")
    parser.add_argument("--runs", type=int, default=3, help="runs per behaviour (the median is printed)")
    parser.add_argument("--mode", choices=["stream", "nonstream"], default="stream")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary, Stack(mcp_names=[], with_reference=False) as stack, \
            HostileTarget() as hostile:
        folder = Path(temporary)
        (folder / "scenarios").mkdir()
        (folder / "scenarios" / "hostile.yaml").write_text(SCENARIO)
        upstream = stack.upstream_url or ""
        targets = {FLOOR: "reference",
                   **{name: hostile.url(name) for name in BEHAVIOURS}}
        figures = {name: [_measure(url, upstream, args.mode, args.timeout, folder) for _ in range(args.runs)]
                   for name, url in targets.items()}
    floor_s = min(wall for runs in figures.values() for wall, _ in runs)  # start-up, loading, reporting
    floor_mb = statistics.median(mb for _, mb in figures[FLOOR])
    print(f"parity run --timeout {args.timeout:g} --mode {args.mode}, median of {args.runs} run(s)\n")
    print(f"{'behaviour':32} {'wall s':>7} {'max s':>7} {'peak MB':>8} {'max MB':>8}")
    broken = []
    for name, runs in figures.items():
        walls, peaks = [wall for wall, _ in runs], [mb for _, mb in runs]
        print(f"{name:32} {statistics.median(walls):7.2f} {max(walls):7.2f} {statistics.median(peaks):8.0f} "
              f"{max(peaks):8.0f}")
        if name != FLOOR and (max(peaks) > floor_mb + SLACK_MB or max(walls) > floor_s + args.timeout + SLACK_S):
            broken.append(name)
    print(f"\nbound: wall <= the quickest run's {floor_s:.2f} s + timeout + {SLACK_S:g} s; peak <= the floor's "
          f"{floor_mb:.0f} MB + {SLACK_MB:g} MB")
    print("broken by: " + ", ".join(broken) if broken else "every behaviour within the bound")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()

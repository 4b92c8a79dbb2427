"""Benchmark: wall time and peak memory of `parity run` over the whole built-in suite (or the
scenarios named with `--scenario`: one alone measures start-up), for one or more variants (an
interpreter, i.e. a checkout installed in its own virtual environment, times a `--jobs` value)
run in interleaved rounds, so a machine that gets busier or quieter weighs on every variant
alike. Prints each variant's median and range, and its median ratio to the first variant,
paired round by round; a run that does not pass (exit 0) is counted.

With `--shards N`, each variant's whole run is followed, in the same round, by its N shards
(`--shard I/N`, balanced by that whole run's `results.json`), one after another as N machines
would each run one; the longest shard is what a CI split over N runners waits for. Prints its
median and its ratio to the whole run, paired round by round.

    python tests/benchmarks/parity_run.py [--rounds N] [--jobs 2,4] [--scenario ID ...] [--shards 4]
                                          [--python before=/other/.venv/bin/python] [-- RUN OPTIONS]

What follows `--` is given to every `parity run` (`-- --target URL` times a run against your own
gateway, beside `parity serve`).

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


def _run(variant: Variant, reports: Path, *options: str) -> Timing:
    started = time.perf_counter()
    process = subprocess.Popen([variant.python, "-m", "responses_parity.harness", "run", "--jobs", str(variant.jobs),
                                "--report-dir", str(reports), *options],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return Timing(wall, usage.ru_maxrss / 1024, process.returncode == 0)


def _longest_shard(variant: Variant, reports: Path, count: int, given: list[str]) -> Timing:
    """The variant's `count` shards, one after another, balanced by the whole run in `reports`:
    the longest one's wall time, the largest peak, and whether every one passed."""
    durations = ["--shard-durations", str(reports / "results.json")]
    shards = [_run(variant, reports.with_name(f"{reports.name}-shard-{index}"), *given,
                   "--shard", f"{index}/{count}", *durations) for index in range(1, count + 1)]
    return Timing(max(shard.wall_s for shard in shards), max(shard.peak_mib for shard in shards),
                  all(shard.passed for shard in shards))


def _print(times: dict[Variant, list[Timing]], against: dict[Variant, list[Timing]]) -> None:
    """Each variant's median (min-max), its median ratio to its pair in `against` round by
    round, its peak RSS, and how many runs did not pass."""
    for variant, timings in times.items():
        walls = [timing.wall_s for timing in timings]
        ratios = [mine.wall_s / theirs.wall_s for mine, theirs in zip(timings, against[variant], strict=True)]
        failed = sum(not timing.passed for timing in timings)
        print(f"  {variant.name:28} {statistics.median(walls):6.2f} ({min(walls):.2f}-{max(walls):.2f})  "
              f"x{statistics.median(ratios):.2f}  {max(timing.peak_mib for timing in timings):4.0f} MiB"
              + (f"  {failed} run(s) did not pass" if failed else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", default="4", help="Comma-separated --jobs values to compare.")
    parser.add_argument("--scenario", action="append", default=[], metavar="ID",
                        help="Run only this scenario (repeatable; default: the whole built-in suite).")
    parser.add_argument("--shards", type=int, default=0, metavar="N",
                        help="Also run each variant's N shards after its whole run, and report the longest.")
    parser.add_argument("--python", action="append", default=[], metavar="NAME=PATH",
                        help="An interpreter whose installed responses-parity to run (repeatable; default: this one).")
    parser.add_argument("run_options", nargs="*", metavar="-- RUN OPTIONS",
                        help="Given to every parity run (after --).")
    args = parser.parse_args()
    pythons = [entry.partition("=")[::2] for entry in args.python] or [("this", sys.executable)]
    variants = [Variant(f"{name} --jobs {jobs}", path, int(jobs))
                for name, path in pythons for jobs in args.jobs.split(",")]
    given = [word for scenario in args.scenario for word in ("-s", scenario)] + args.run_options
    times: dict[Variant, list[Timing]] = {variant: [] for variant in variants}
    shards: dict[Variant, list[Timing]] = {variant: [] for variant in variants}
    with tempfile.TemporaryDirectory() as folder:
        for round_index in range(args.rounds):
            shift = round_index % len(variants)
            for number, variant in enumerate(variants[shift:] + variants[:shift]):
                reports = Path(folder) / f"variant-{number}"
                times[variant].append(_run(variant, reports, *given))
                if args.shards:
                    shards[variant].append(_longest_shard(variant, reports, args.shards, given))
    first = variants[0]
    what = ", ".join(args.scenario) if args.scenario else "the built-in suite"
    print(f"parity run over {what}, {args.rounds} interleaved rounds: wall seconds median (min-max), "
          f"ratio to {first.name!r} (median of paired rounds), peak RSS")
    _print(times, {variant: times[first] for variant in variants})
    if args.shards:
        print(f"the longest of {args.shards} shards (balanced by the round's whole run), ratio to that whole run:")
        _print(shards, times)


if __name__ == "__main__":
    main()

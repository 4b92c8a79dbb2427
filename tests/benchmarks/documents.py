"""Benchmark: what bounded reading costs, in interleaved rounds in this process. Times parsing the
built-in scenarios as the loader did before the bounds (`yaml.load` with its YAML 1.2 loader)
and as it does now (`loader.parse_yaml`: the same parser, then the measure of the node graph),
paired round by round; loading the whole catalogue (parsing and validation); refusing a billion
laughs and a recursive anchor; and the depth of a small and a 10,000-item request body (the
gateway measures every body), in CPU time. Prints the median and range of each, and the median
ratio of the bounded parse to the unbounded one.

    python tests/benchmarks/documents.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import yaml

from responses_parity.harness.scenario import loader
from responses_parity.openai_contract.documents import DocumentError, nesting_depth, parse_yaml

LAUGHS = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
          + "".join(f"{name}: &{name} [{','.join([f'*{below}'] * 9)}]\n"
                    for below, name in zip("abcdefgh", "bcdefghi", strict=True)))
RECURSIVE = "id: recursive\nsteps:\n  - request: {input: &r [*r]}\n"
SMALL_BODY = {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
              "tools": [{"type": "function", "name": "f",
                         "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}]}
LONG_BODY = {"model": "m", "input": [{"role": "user", "content": "x"} for _ in range(10_000)]}


def _refused(text: str) -> None:
    try:
        parse_yaml(text)
    except DocumentError:
        return
    raise AssertionError("a hostile document was read")


def _timed(work: Callable[[], object]) -> float:
    """The CPU seconds `work` takes in this process (all of it runs here, in one thread): on a
    loaded machine, less disturbed than wall time by waiting for a processor."""
    started = time.process_time()
    work()
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=31)
    args = parser.parse_args()
    files = loader.scenario_files([loader.builtin_scenarios_dir()])
    texts = [path.read_text(encoding="utf-8") for path in files]
    work: dict[str, Callable[[], object]] = {
        "parse the catalogue, unbounded": lambda: [yaml.load(text, Loader=loader._Yaml12Loader) for text in texts],
        "parse the catalogue, bounded": lambda: [loader.parse_yaml(text) for text in texts],
        "load the catalogue (parse + validate)": lambda: loader.load([loader.builtin_scenarios_dir()]),
        "refuse a billion laughs": lambda: _refused(LAUGHS),
        "refuse a recursive anchor": lambda: _refused(RECURSIVE),
        "depth of a small request body": lambda: nesting_depth(SMALL_BODY),
        "depth of a 10,000-item request body": lambda: nesting_depth(LONG_BODY),
    }
    times: dict[str, list[float]] = {name: [] for name in work}
    for _ in range(args.rounds):
        for name, run in work.items():
            times[name].append(_timed(run))
    print(f"{len(files)} built-in scenario files, {sum(map(len, texts)):,} characters; {args.rounds} rounds")
    for name, seconds in times.items():
        print(f"{name:<40} median {statistics.median(seconds) * 1e3:9.3f} ms"
              f"  (min {min(seconds) * 1e3:.3f}, max {max(seconds) * 1e3:.3f})")
    ratios = [bounded / plain for bounded, plain in zip(times["parse the catalogue, bounded"],
                                                        times["parse the catalogue, unbounded"], strict=True)]
    print(f"bounded / unbounded parse, paired: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()

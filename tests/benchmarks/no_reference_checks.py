"""Benchmark: how fast the no-reference checks (SDK schema + stream grammar) go over the
OpenAI-shaped exchanges in tests/harness/exchanges, and what building the validators costs.

    python tests/benchmarks/no_reference_checks.py [--repeat N]

Prints figures; it asserts nothing (speed is measured here, never in tests).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from responses_parity.harness.judge.checks import no_reference_findings
from responses_parity.harness.judge.schemas import validators
from responses_parity.harness.wire.exchange import Exchange

EXCHANGES = Path(__file__).parents[1] / "harness" / "exchanges"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    started = time.perf_counter()
    validators()
    built = time.perf_counter() - started
    documents = [json.loads(path.read_text()) for path in sorted(EXCHANGES.glob("*.json"))]
    events = sum(len(Exchange.from_file(d).events) or 1 for d in documents)
    started = time.perf_counter()
    for _ in range(args.repeat):
        for document in documents:
            no_reference_findings(Exchange.from_file(document))
    elapsed = time.perf_counter() - started
    print(f"validators built from the openai SDK in {built * 1000:.0f} ms")
    print(f"{len(documents)} exchanges ({events} events or bodies) x {args.repeat}: {elapsed:.2f} s, "
          f"{events * args.repeat / elapsed:,.0f} events or bodies per second")


if __name__ == "__main__":
    main()

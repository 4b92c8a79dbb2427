"""Benchmark: a large budget of hostile request bodies against the reference gateway (the
default suite runs 150 in tests/reference_impl/test_request_properties.py). Prints how many
requests were sent, how many were accepted and refused, and the three counts that must be 0:
5xx answers, 4xx answers without OpenAI's envelope, and bodies accepted although OpenAI refuses
them (with the first example of each).

    python tests/benchmarks/request_fuzz.py [--examples N] [--seed S]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx2
from hypothesis import HealthCheck, given, seed, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference_impl"))

from request_mutations import mutated_bodies, probed_gateway, verdict

from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.probe.surfaces import surface_named


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    with Stack(mcp_names=[], with_reference=False) as stack:
        gateway = probed_gateway(stack.upstream_url or "", stack.search_url)
        try:
            with httpx2.Client(base_url=gateway.url, timeout=30) as client:
                @seed(args.seed)
                @settings(max_examples=args.examples, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
                @given(body=mutated_bodies())
                def probe(body: dict[str, Any]) -> None:
                    answer = client.post("/v1/responses", json=body)
                    counts["requests"] += 1
                    counts[f"HTTP {answer.status_code}"] += 1
                    if (problem := verdict(surface_named("responses").refuses(body), answer)) is not None:
                        kind = "5xx" if answer.status_code >= 500 else "accepted" if answer.status_code < 400 \
                            else "envelope"
                        counts[kind] += 1
                        first.setdefault(kind, f"{problem}\n    body: {body}")

                started = time.perf_counter()
                probe()
                elapsed = time.perf_counter() - started
        finally:
            gateway.stop()
    print(f"{counts['requests']} requests in {elapsed:.0f} s (hypothesis seed {args.seed})")
    for status in sorted(key for key in counts if key.startswith("HTTP")):
        print(f"  {status}: {counts[status]}")
    for kind, label in (("5xx", "5xx answers"), ("envelope", "4xx without OpenAI's envelope"),
                        ("accepted", "accepted although OpenAI refuses it")):
        print(f"{label}: {counts[kind]}" + (f"\n  first: {first[kind]}" if kind in first else ""))
    sys.exit(1 if any(counts[kind] for kind in ("5xx", "envelope", "accepted")) else 0)


if __name__ == "__main__":
    main()

"""What a step may expect, one spec per field (`spec.py` says what a spec is): the answer's
framing (`envelope`), its Response (`response`), its body and headers (`body`), list pages
(`page`), chat completions (`chat`), what it must never show (`secrets`), its stream (`stream`),
and what the gateway sent meanwhile (`upstream`). `expect` assembles them into the model of a
step's `expect` and walks them to lint, compare and project."""

from .expect import (STREAMS_ONLY, VARIANT_RULE, Expect, ModelDependent, compare, expectation_of, kind_of,
                     lint_expect, stated_sequence)
from .spec import Stated, list_diff, subset_mismatches
from .upstream import UpstreamExpect, compare_upstream, lint_upstream

__all__ = ["STREAMS_ONLY", "VARIANT_RULE", "Expect", "ModelDependent", "Stated", "UpstreamExpect", "compare",
           "compare_upstream", "expectation_of", "kind_of", "lint_expect", "lint_upstream", "list_diff",
           "stated_sequence", "subset_mismatches"]

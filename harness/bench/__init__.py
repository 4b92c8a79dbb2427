"""`parity bench`: what a gateway adds to each model turn, measured side by side with the floor
(the same work without a gateway) on loopback. `client` is the load generator, `processes` the
servers a run starts, `workloads` W1 to W4, `run` the interleaved rounds, `report` the figures.
"""

from .report import write
from .run import BenchOptions, BenchResult, run_bench
from .workloads import WORKLOADS, Sizes

__all__ = ["WORKLOADS", "BenchOptions", "BenchResult", "Sizes", "run_bench", "write"]

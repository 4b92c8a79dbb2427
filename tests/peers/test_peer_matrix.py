"""The peer tier: every built-in scenario, in every mode (WebSocket mode too), against smg,
Llama Stack, OGX, open-responses-server and LiteLLM, each installed from PyPI into its own
cached environment on first use, started against the scripted upstream on loopback, run and
stopped; then the matrix across them and the reference gateway. Opt in with
`pytest --peers tests/peers` (`parity matrix` is the same run from the command line)."""

from __future__ import annotations


import pytest

from responses_parity.harness.engine.session import TargetOptions
from responses_parity.harness.report.matrix import Matrix, build_matrix, run_matrix, write_matrix
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load
from responses_parity.harness.scenario.loader import units_of
from responses_parity.harness.scenario.model import MODES

pytestmark = pytest.mark.peers
PEERS = ["smg", "llama-stack", "ogx", "open-responses-server", "litellm"]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    root = tmp_path_factory.mktemp("peers")
    catalogue = load([builtin_scenarios_dir()])
    runs = run_matrix(["reference", *PEERS], units_of(catalogue.scenarios, MODES), TargetOptions(timeout_s=30),
                      root / "reports", jobs=2, say=print)
    built = build_matrix(runs, "pytest --peers tests/peers")
    write_matrix(built, root / "matrix.md")
    return built


def _cells(matrix: Matrix, target: str, scenario: str) -> list[str]:
    row = next(row for row in matrix.rows if row.scenario == scenario)
    index = [run.name for run in matrix.runs].index(target) * len(matrix.modes)
    return [cell.status for cell in row.cells[index:index + len(matrix.modes)]]


@pytest.mark.parametrize("peer", PEERS)
def test_the_peer_installs_starts_and_runs_the_suite(matrix: Matrix, peer: str) -> None:
    run = next(run for run in matrix.runs if run.name == peer)
    assert run.failure is None, run.failure
    reference = matrix.runs[0].document
    assert run.document is not None and reference is not None
    assert run.document["summary"]["units"] == reference["summary"]["units"]  # every scenario, in each of its modes


def test_the_reference_gateway_passes_everything_it_runs(matrix: Matrix) -> None:
    reference = matrix.runs[0].document
    assert reference is not None
    assert reference["summary"]["fail"] == reference["summary"]["could_not_run"] == 0


@pytest.mark.parametrize("peer", PEERS)
def test_every_peer_reaches_the_scripted_model_and_its_latency_is_measured(matrix: Matrix, peer: str) -> None:
    run = next(run for run in matrix.runs if run.name == peer)
    assert run.document is not None
    plain = [step["timing"] for result in run.document["results"] if result["scenario"] == "text-basic"
             for step in result["steps"]]
    assert any(timing and timing["model_requests"] == 1 for timing in plain)
    assert matrix.latencies()[peer] is not None


def test_what_a_profile_says_its_gateway_lacks_is_unsupported_not_failed(matrix: Matrix) -> None:
    assert _cells(matrix, "open-responses-server", "mcp-call") == ["unsupported"] * len(matrix.modes)
    assert _cells(matrix, "smg", "text-basic")[matrix.modes.index("websocket")] == "unsupported"
    assert "unsupported" not in _cells(matrix, "litellm", "mcp-call")  # through its own MCP server names and TLS

"""The SDK examples in `examples/` run as their docstrings say: `parity serve --script` with the
example's script, the reference gateway as a separate process with
`examples/reference-gateway.yaml` (on free ports here), then the example itself."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from parity_process import PARITY, running

from responses_parity.harness.engine import child_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LISTENING = r"reference gateway listening on (?P<url>http://\S+)"
EXPECTED = {
    "openai_sdk": [
        'mcp_call calc.add({"a":2,"b":3}) -> 5',
        "answer: 2 + 3 = 5.",
        'function_call get_weather({"city":"Paris"})',
        "answer: It is 18 °C and sunny in Paris.",
    ],
    "openai_agents": [
        "get_weather('Paris') runs in the agent",
        'mcp_call calc.add({"a":19,"b":23}) -> 42',
        "final output: 19 + 23 = 42, and it is 18 °C and sunny in Paris.",
    ],
}


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_an_example_drives_the_reference_gateway_through_its_sdk(example: str, tmp_path: Path) -> None:
    if example == "openai_agents":
        pytest.importorskip("agents", reason="the openai-agents SDK comes with the test extra: .[test]")
    with running(tmp_path) as start:
        serve = start([str(PARITY), "serve", "--port", "0", "--json", "--script",
                       str(EXAMPLES / f"{example}.script.yaml")], "serve")
        served = json.loads(serve.wait_for(r"^\{.*\}$").group(0))
        config = yaml.safe_load((EXAMPLES / "reference-gateway.yaml").read_text())
        assert config["outbound"] == served["reference_config"]["outbound"]  # what `parity serve` prints
        config["upstream"]["url"] = served["model_base_url"]
        (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(config))
        gateway = start([str(PARITY), "serve", "reference", "--port", "0", "--config", str(tmp_path / "gateway.yaml")],
                        "gateway").wait_for(LISTENING)["url"]
        env = {"PATH": "/usr/bin:/bin", "GATEWAY_BASE_URL": f"{gateway}/v1",
               "MCP_CALC_URL": served["mcp"]["calc"]["url"]}
        ran = child_process.run([sys.executable, str(EXAMPLES / f"{example}.py")], capture_output=True, text=True,
                                env=env, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == EXPECTED[example]

"""The openai-agents SDK against a gateway whose model is the scripted upstream: an Agent with a
hosted MCP tool (the gateway runs it on the `calc` fixture) and a function tool (the agent runs
it), driven by the Runner through the gateway's Responses API.

    parity serve --script examples/openai_agents.script.yaml   # the scripted model and the MCP fixtures
    parity serve reference --config examples/reference-gateway.yaml
    python examples/openai_agents.py

GATEWAY_BASE_URL (default http://127.0.0.1:8640/v1, the reference gateway) and MCP_CALC_URL
(default http://127.0.0.1:8643/mcp) say where they are.
"""

from __future__ import annotations

import asyncio
import os

from agents import Agent, HostedMCPTool, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

MODEL = "parity-model"  # the scripted upstream answers to any name


@function_tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    print(f"get_weather({city!r}) runs in the agent")
    return f"18 °C and sunny in {city}"


async def main() -> None:
    set_tracing_disabled(True)  # traces would go to OpenAI; this talks to the gateway alone
    client = AsyncOpenAI(base_url=os.environ.get("GATEWAY_BASE_URL", "http://127.0.0.1:8640/v1"),
                         api_key=os.environ.get("GATEWAY_API_KEY", "not-checked"))
    calc = HostedMCPTool(tool_config={"type": "mcp", "server_label": "calc", "require_approval": "never",
                                      "server_url": os.environ.get("MCP_CALC_URL", "http://127.0.0.1:8643/mcp")})
    agent = Agent(name="assistant", instructions="Use the calculator for sums.", tools=[calc, get_weather],
                  model=OpenAIResponsesModel(model=MODEL, openai_client=client))
    result = await Runner.run(agent, "What is 19 + 23, and what is the weather in Paris?")
    for item in result.new_items:
        raw = item.raw_item
        kind = raw.get("type") if isinstance(raw, dict) else raw.type
        if kind == "mcp_call":
            print(f"mcp_call {raw.server_label}.{raw.name}({raw.arguments}) -> {raw.output}")
    print(f"final output: {result.final_output}")


if __name__ == "__main__":
    asyncio.run(main())

"""The official openai SDK against a gateway whose model is the scripted upstream: an MCP tool
the gateway runs on the `calc` fixture, then a function call the client runs (a round trip).

    parity serve --script examples/openai_sdk.script.yaml      # the scripted model and the MCP fixtures
    parity serve reference --config examples/reference-gateway.yaml
    python examples/openai_sdk.py

GATEWAY_BASE_URL (default http://127.0.0.1:8640/v1, the reference gateway) and MCP_CALC_URL
(default http://127.0.0.1:8643/mcp) say where they are.
"""

from __future__ import annotations

import json
import os

from openai import OpenAI

MODEL = "parity-model"  # the scripted upstream answers to any name
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def get_weather(city: str) -> dict[str, object]:
    return {"city": city, "celsius": 18, "sky": "sunny"}


def main() -> None:
    client = OpenAI(base_url=os.environ.get("GATEWAY_BASE_URL", "http://127.0.0.1:8640/v1"),
                    api_key=os.environ.get("GATEWAY_API_KEY", "not-checked"))

    # An MCP tool: the gateway lists the server's tools, runs the call the model makes, and answers.
    calc = {"type": "mcp", "server_label": "calc", "require_approval": "never",
            "server_url": os.environ.get("MCP_CALC_URL", "http://127.0.0.1:8643/mcp")}
    answer = client.responses.create(model=MODEL, input="What is 2 + 3? Use the calculator.", tools=[calc])
    for item in answer.output:
        if item.type == "mcp_call":
            print(f"mcp_call {item.server_label}.{item.name}({item.arguments}) -> {item.output}")
    print(f"answer: {answer.output_text}")

    # A function tool: the response stops on the call, the client runs it and sends the output back.
    first = client.responses.create(model=MODEL, input="What is the weather in Paris?", tools=[WEATHER_TOOL])
    call = next(item for item in first.output if item.type == "function_call")
    print(f"function_call {call.name}({call.arguments})")
    output = json.dumps(get_weather(**json.loads(call.arguments)))
    second = client.responses.create(model=MODEL, previous_response_id=first.id, tools=[WEATHER_TOOL],
                                     input=[{"type": "function_call_output", "call_id": call.call_id,
                                             "output": output}])
    print(f"answer: {second.output_text}")


if __name__ == "__main__":
    main()

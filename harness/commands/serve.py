"""`parity serve`: the scripted upstream, the MCP fixtures and the search fixture together on
loopback, with the settings a gateway needs to use them; or one part alone (the scripted
upstream, an MCP fixture, the reference gateway)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from ...fixtures.mcp import FIXTURE_SERVERS
from ...fixtures.upstream.app import UpstreamState, build_upstream_app
from ...fixtures.upstream.script import AdHocScript, ScriptFileError, load_adhoc_script
from ..defaults import DEFAULT_UPSTREAM_PORT, DEFAULT_UPSTREAM_URL
from ..engine.collector import settle
from ..engine.server_thread import ServerThread
from ..engine.stack import Stack, fixture_ports, search_port
from ..errors import HarnessError
from ..model.guard_allowance import GuardAllowance
from ..options import SERVED_GATEWAY_UPSTREAM
from .click_options import click_options, json_option
from .console import EXIT_USAGE, err, error, out, say

_script_option = click.option(
    "--script", "script", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="A YAML file of model turns answering requests that carry no run marker, in order of arrival "
         "(docs/reference/scripted-upstream.md: drive it by hand).")
"""`--script` of `parity serve` and of `parity serve upstream`."""
_strict_option = click.option(
    "--strict", is_flag=True, default=False,
    help="Answer a model request the model's API would refuse (an unknown parameter, a value out of range) with "
         "that API's 400, not as scripted (either way, each such parameter is a finding on the step).")
"""`--strict` of `parity serve` and of `parity serve upstream`."""
Served = TypeVar("Served")


def _script(path: Path | None) -> AdHocScript | None:
    try:
        return None if path is None else load_adhoc_script(path)
    except ScriptFileError as problem:
        raise click.BadParameter(str(problem), param_hint="--script") from problem


@click.group("serve", invoke_without_command=True)
@click.option("--port", type=int, default=DEFAULT_UPSTREAM_PORT, show_default=True,
              help="The scripted upstream's port; the MCP fixtures, then the search fixture, listen on the ports "
                   "after it (0: any free ports).")
@_script_option
@_strict_option
@json_option("Print the settings as one JSON object on standard output (the rest goes to standard error).")
@click.pass_context
def serve(ctx: click.Context, port: int, script: Path | None, strict: bool, as_json: bool) -> None:
    """Serve the scripted upstream, the MCP fixtures and the search fixture on loopback, and print
    the settings your gateway needs (model base URL, MCP fixture URLs, the web search backend,
    what an outbound guard must allow); or one part alone: `upstream`, `mcp NAME`, `reference`.
    `parity run --target URL` then uses them."""
    if ctx.invoked_subcommand is not None:
        if given := [option.opts[0] for option in ctx.command.params
                     if ctx.get_parameter_source(option.name or "") is not ParameterSource.DEFAULT]:
            raise click.UsageError(f"{', '.join(given)} before {ctx.invoked_subcommand!r} applies to `parity serve` "
                                   f"alone; give the part's own options after its name")
        return
    adhoc = _script(script)
    serve_forever(Stack(mcp_names=FIXTURE_SERVERS, with_reference=False, upstream_port=port,
                        mcp_ports=fixture_ports(port) if port else {}, search_port=search_port(port) if port else 0,
                        adhoc_script=adhoc, strict_upstream=strict).__enter__,
                  lambda stack: _announce(stack, as_json), Stack.close)


def _settings(stack: Stack, allowance: GuardAllowance) -> dict[str, Any]:
    """What a gateway needs to use the served fixtures, and how `parity run` finds them."""
    assert stack.upstream_url is not None
    upstream_option = "" if stack.upstream_url == DEFAULT_UPSTREAM_URL else f" --upstream {stack.upstream_url}"
    return {
        "upstream": stack.upstream_url,
        "model_base_url": f"{stack.upstream_url}/v1",
        "mcp": {name: {"url": f"{fixture.base_url}/mcp", "sse_url": f"{fixture.base_url}/sse"}
                for name, fixture in stack.mcp.items()},
        "search": {"url": stack.search_url, "endpoint": f"{stack.search_url}/search"},
        "outbound_allow": {"ranges": list(allowance.ranges), "ports": list(allowance.ports)},
        "reference_config": {"upstream": {"url": f"{stack.upstream_url}/v1"},
                             "outbound": {"allow": list(allowance.ranges)},
                             "web_search": {"provider": "http", "url": stack.search_url}},
        "run": f"parity run --target GATEWAY_URL{upstream_option}",
    }


def _announce(stack: Stack, as_json: bool) -> None:
    assert stack.search_url is not None  # `parity serve` starts its own
    allowance = GuardAllowance.for_urls([*(fixture.base_url for fixture in stack.mcp.values()), stack.search_url])
    found = _settings(stack, allowance)
    if as_json:
        print(json.dumps(found), flush=True)
        err.print("serving (Ctrl-C to stop)")
        return
    width = max(len(name) for name in found["mcp"])
    lines = [
        f"scripted upstream (the model) on {found['upstream']}",
        f"  model base URL: {found['model_base_url']}   (Responses, Chat Completions or Anthropic Messages; "
        "any model name, any API key)",
        "MCP fixtures (each scenario names one in its request's MCP tools, at a URL of its own on these ports):",
        *(f"  {name:<{width}}  {urls['url']}   (SSE: {urls['sse_url']})" for name, urls in found["mcp"].items()),
        "search fixture (the web_search backend; each scenario states what a search finds):",
        f"  {found['search']['endpoint']}   (POST {{query, max_results, allowed_domains}})",
        f"outbound guard: if your gateway has one, allow {', '.join(allowance.ranges)} ({allowance.ports_text()})",
        "reference gateway settings (parity serve reference --config FILE):",
        f"  upstream: {{url: \"{found['model_base_url']}\"}}",
        f"  {allowance.reference_setting()}",
        f"  web_search: {{provider: http, url: \"{found['search']['url']}\"}}",
        f"with your gateway running on these settings: {found['run']}",
        "serving until Ctrl-C",
    ]
    for line in lines:
        say(line)


def serve_forever(start: Callable[[], Served], announce: Callable[[Served], None],
                  stop: Callable[[Served], None]) -> None:
    """Start what `start` starts, announce it, and serve until Ctrl-C, then `stop` it; a port
    that cannot be listened on is a one-line error and exit 2."""
    settle()
    try:
        started = start()
    except HarnessError as problem:
        error(f"{problem}; choose another with --port")
        sys.exit(EXIT_USAGE)
    announce(started)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        stop(started)


def _serve_app(app: Any, port: int, what: str) -> None:
    serve_forever(lambda: ServerThread(app, port).start(),
                  lambda server: out.print(f"{what} listening on {server.url} (Ctrl-C to stop)"), ServerThread.stop)


@serve.command("upstream")
@click.option("--port", type=int, default=DEFAULT_UPSTREAM_PORT, show_default=True)
@_script_option
@_strict_option
def serve_upstream(port: int, script: Path | None, strict: bool) -> None:
    """The scripted upstream model alone (point your gateway's OpenAI base URL at .../v1)."""
    _serve_app(build_upstream_app(UpstreamState(adhoc=_script(script), strict=strict)), port, "scripted upstream")


@serve.command("mcp")
@click.argument("name", type=click.Choice(sorted(FIXTURE_SERVERS)))
@click.option("--port", type=int, default=DEFAULT_UPSTREAM_PORT + 1, show_default=True)
def serve_mcp(name: str, port: int) -> None:
    """An MCP fixture server (streamable HTTP at /mcp, SSE at /sse)."""
    _serve_app(FIXTURE_SERVERS[name](), port, f"MCP fixture {name!r}")


@serve.command("reference")
@click.option("--port", type=int, default=DEFAULT_UPSTREAM_PORT - 2, show_default=True)
@click.option("--config", "config_file", type=click.Path(exists=True, path_type=Path), default=None,
              help="Gateway settings (YAML).")
@click_options(SERVED_GATEWAY_UPSTREAM)
@click.option("--store", "store_path", default="reference.sqlite3", show_default=True,
              help="SQLite file for responses and conversations (':memory:' keeps nothing); a --config "
                   "file's store_path wins.")
def serve_reference(port: int, config_file: Path | None, upstream: str | None, store_path: str) -> None:
    """The reference gateway."""
    from ..engine.reference_gateway import ConfigError, GatewayConfig, build_gateway_app  # this command's alone

    extra: ServerThread | None = None
    try:
        if config_file is not None:
            config = GatewayConfig.from_file(config_file)
        else:
            if upstream is None:
                extra = ServerThread(build_upstream_app()).start()
                upstream = f"{extra.url}/v1"
                out.print(f"scripted upstream listening on {extra.url}")
            config = GatewayConfig(upstream_url=upstream, store_path=store_path)
    except ConfigError as problem:
        raise click.UsageError(str(problem)) from problem
    try:
        _serve_app(build_gateway_app(config), port, "reference gateway")
    finally:
        if extra is not None:
            extra.stop()

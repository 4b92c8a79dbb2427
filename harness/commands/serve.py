"""`parity serve`: one part alone on loopback (the scripted upstream, an MCP fixture, the
reference gateway), to point your own gateway at."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from ...fixtures.mcp import FIXTURE_SERVERS
from ...fixtures.upstream import build_upstream_app
from ...reference_impl import ConfigError, GatewayConfig, build_gateway_app
from ..defaults import DEFAULT_UPSTREAM_PORT
from ..findings import HarnessError
from ..stack import ServerThread
from .console import EXIT_USAGE, error, out


@click.group("serve")
def serve() -> None:
    """Serve one part alone on loopback, to point your own gateway at the fixtures."""


def _serve_forever(app: Any, port: int, what: str) -> None:
    """Serve until Ctrl-C; a port that cannot be listened on is a one-line error and exit 2."""
    try:
        bound = ServerThread(app, port)
    except HarnessError as problem:
        error(f"{problem}; choose another with --port")
        sys.exit(EXIT_USAGE)
    server = bound.start()
    out.print(f"{what} listening on {server.url} (Ctrl-C to stop)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


@serve.command("upstream")
@click.option("--port", type=int, default=DEFAULT_UPSTREAM_PORT, show_default=True)
def serve_upstream(port: int) -> None:
    """The scripted upstream model (point your gateway's OpenAI base URL at .../v1)."""
    _serve_forever(build_upstream_app(), port, "scripted upstream")


@serve.command("mcp")
@click.argument("name", type=click.Choice(sorted(FIXTURE_SERVERS)))
@click.option("--port", type=int, default=DEFAULT_UPSTREAM_PORT + 1, show_default=True)
def serve_mcp(name: str, port: int) -> None:
    """An MCP fixture server (streamable HTTP at /mcp, SSE at /sse)."""
    _serve_forever(FIXTURE_SERVERS[name](), port, f"MCP fixture {name!r}")


@serve.command("reference")
@click.option("--port", type=int, default=DEFAULT_UPSTREAM_PORT - 2, show_default=True)
@click.option("--config", "config_file", type=click.Path(exists=True, path_type=Path), default=None,
              help="Gateway settings (YAML).")
@click.option("--upstream", default=None, help="Model base URL, e.g. http://127.0.0.1:8642/v1 "
                                               "(default: a scripted upstream started alongside).")
@click.option("--store", "store_path", default="reference.sqlite3", show_default=True,
              help="SQLite file for responses and conversations (':memory:' keeps nothing); a --config "
                   "file's store_path wins.")
def serve_reference(port: int, config_file: Path | None, upstream: str | None, store_path: str) -> None:
    """The reference gateway."""
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
        _serve_forever(build_gateway_app(config), port, "reference gateway")
    finally:
        if extra is not None:
            extra.stop()

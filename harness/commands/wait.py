"""`parity wait`: until the servers a script started in the background answer (the step of a
CI job between starting a gateway and running the scenarios against it)."""

from __future__ import annotations

import sys
import time

import click
import httpx2

from ..engine.readiness import poll_until_ready
from ..options import WAIT_TIMEOUT
from .click_options import click_options
from .console import EXIT_FAILED, EXIT_OK, error, say


def _url(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        try:
            url = httpx2.URL(value)
        except httpx2.InvalidURL as problem:
            raise click.BadParameter(f"{value!r} is not a URL ({problem})", ctx, param) from problem
        if url.scheme not in ("http", "https") or not url.host:
            raise click.BadParameter(f"{value!r} is not an http:// or https:// URL with a host", ctx, param)
    return values


@click.command("wait")
@click.argument("urls", metavar="URL...", nargs=-1, required=True, callback=_url)
@click_options(WAIT_TIMEOUT)
def wait_command(urls: tuple[str, ...], timeout_s: float) -> None:
    """Wait until each URL answers a GET with an HTTP status below 500 (a 404 from a gateway
    without a health route counts: its application is up); exit 1 naming each one that did not
    within --timeout."""
    deadline = time.monotonic() + timeout_s
    late = 0
    for url in urls:
        last = poll_until_ready("GET", url, timeout_s=deadline - time.monotonic())
        if last is None:
            say(f"{url} answers")
        else:
            error(f"{url} did not answer within {timeout_s:g}s: {last}")
            late += 1
    sys.exit(EXIT_FAILED if late else EXIT_OK)

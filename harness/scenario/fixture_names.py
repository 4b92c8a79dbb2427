"""The tool names each MCP fixture offers, which scenario validation checks a scenario's tool
names against.

Building a fixture imports the `mcp` SDK (most of a second), so the names are read from the
fixtures once and kept in a cache file (`json_cache`) named after the fixtures' own source and
the installed `mcp` version: `parity run -s ONE` and `parity validate` then build none.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from ...fixtures import mcp as mcp_fixtures
from ...openai_contract.json_cache import cache_dir, load_or_build


def cache_file() -> Path:
    """Where the names, as the installed fixtures and `mcp` SDK give them, are kept."""
    sources = hashlib.sha256()
    for source in sorted(Path(mcp_fixtures.__file__).parent.glob("*.py")):
        sources.update(source.name.encode() + b"\0" + source.read_bytes())
    return cache_dir() / "fixture-tools" / f"mcp-{metadata.version('mcp')}-{sources.hexdigest()[:16]}.json"


def _derived() -> dict[str, list[str]]:
    return {name: sorted(mcp_fixtures.fixture_tools(name)) for name in sorted(mcp_fixtures.FIXTURE_SERVERS)}


def _complete(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == set(mcp_fixtures.FIXTURE_SERVERS) and \
        all(isinstance(names, list) and all(isinstance(n, str) for n in names) for names in value.values())


@cache
def _names() -> dict[str, list[str]]:
    return load_or_build(cache_file(), _derived, _complete)


@cache
def fixture_tools(name: str) -> frozenset[str]:
    """The names of the tools the MCP fixture `name` offers (`fixtures.mcp.FIXTURE_SERVERS`)."""
    return frozenset(_names()[name])

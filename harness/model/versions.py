"""What a report or a golden set names as what produced it."""

from __future__ import annotations

from importlib import metadata


def versions() -> dict[str, str]:
    """The versions a report must name: this tool and the SDKs it takes its schemas from."""
    found = {}
    for name in ("responses-parity", "openai", "mcp"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "unknown"
    return found

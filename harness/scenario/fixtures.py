"""The MCP fixture servers a scenario names: where each listens, and the per-run URLs its
placeholders give (`{{mcp.<name>.url}}`, `.sse_url`, `.failing_url[<status>]`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .placeholders import View


@dataclass(frozen=True)
class McpFixture(View):
    """Where one MCP fixture server listens, and its per-run URLs (what `{{mcp.<name>...}}` gives:
    `.url`, `.sse_url`, `.failing_url[<status>]`)."""

    name: str
    base_url: str
    run: str = ""

    def for_run(self, run: str) -> McpFixture:
        return McpFixture(self.name, self.base_url, run)

    @property
    def url(self) -> str:
        """Streamable HTTP endpoint for this run."""
        return f"{self.base_url}/r/{self.run}/mcp"

    @property
    def sse_url(self) -> str:
        """SSE endpoint for this run."""
        return f"{self.base_url}/r/{self.run}/sse"

    def failing_url(self, status: int) -> str:
        """An endpoint for this run that answers every request with HTTP `status`."""
        return f"{self.base_url}/r/{self.run}/status/{status}/mcp"

    def select(self, key: str | int) -> Any:
        if key == "url":
            return self.url
        if key == "sse_url":
            return self.sse_url
        if key == "failing_url":
            return _FailingUrls(self)
        raise LookupError(f"has no {key!r}: {MCP_URLS_SHOWN}")

    def value(self) -> Any:
        raise LookupError(f"is an MCP fixture: name one of its URLs ({MCP_URLS_SHOWN})")


MCP_URLS = ("url", "sse_url", "failing_url")
MCP_URLS_SHOWN = "url, sse_url, failing_url[<status>]"
FAILING_STATUSES = range(100, 600)


@dataclass(frozen=True)
class _FailingUrls(View):
    """`{{mcp.<name>.failing_url[<status>]}}`: the fixture's endpoint failing with that status."""

    fixture: McpFixture

    def select(self, key: str | int) -> str:
        if not isinstance(key, int) or key not in FAILING_STATUSES:
            raise LookupError(f"is selected by an HTTP status (100 to 599), not [{key!r}]")
        return self.fixture.failing_url(key)

    def value(self) -> Any:
        raise LookupError("needs the HTTP status it answers with: failing_url[401]")

"""Remove secrets before anything is written or printed: reports, saved exchanges, goldens,
baselines, the console.

A `Redactor` holds the secrets of one run, added as the run goes (the target's headers, what
its scenarios place where secrets go, the MCP tools' secrets of the requests the harness sent),
and replaces with `<redacted>`:
- values under secret-bearing keys at any depth (`authorization`, `api_key`, ..., which covers
  MCP tools' `authorization` and request headers), and the header values of MCP tools, where
  they sit (such a value is not, by its key's name, a secret of the run);
- anything that looks like an API key, a bearer token, or an OpenAI organization or project id;
- every secret it knows, by value, wherever it appears inside a string: as it is, JSON-escaped
  (as it sits in the JSON or SSE text a gateway echoes it in) and percent-encoded (in a URL);
  of a credential `<scheme> <token>` (Bearer, Basic, Token) the token alone too, and of a Basic
  one the decoded `user:password` and the password.
Values shorter than `MIN_SECRET_LENGTH` characters are not taken as secrets (removing them
would blot out ordinary words). Not undone: other changes a gateway may make to a secret
(hashing, truncating, splitting it, encoding it in base64).

The known secrets are found by automatons (`known_strings.KnownStrings`), so removing them
costs about the same with ten thousand known as with one, and learning one more does not cost
a rebuild of all the others. `within` gives a redactor that also removes the secrets of one
exchange (an MCP tool's authorization in one request) without making them secrets of the run.

Artifacts reach the disk through `Redactor.write_json` and `Redactor.write_text`; a console
prints through a `RedactedStream`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from .known_strings import KnownStrings

REDACTED = "<redacted>"
SECRET_KEYS = frozenset({"authorization", "api_key", "api-key", "x-api-key", "openai-organization",
                         "openai-project", "proxy-authorization", "cookie", "set-cookie", "mcp_authorization"})
MIN_SECRET_LENGTH = 6
MAX_LOG_LINE_BYTES = 4 * 2**20
"""The longest line `Redactor.rewrite_log` redacts; a longer one is left out (it is not read whole)."""
_SECRET_TEXT = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-~+/=]{8,}|\borg-[A-Za-z0-9]{8,}|\bproj_[A-Za-z0-9]{8,})"
)
_SECRET_TEXT_STARTS = ("sk-", "Bearer", "org-", "proj_")
"""What every match of `_SECRET_TEXT` starts with. Text holding none of them is left as it is
without running the pattern: its alternatives share no first character that `re` could skip to,
so it scans at about 17 MB/s (an 8 KB stream: 0.5 ms), where looking for these is a C search."""
_CREDENTIAL = re.compile(r"(?i)(bearer|basic|token)\s+(\S+)")


def redact_text(text: str) -> str:
    """`text` without anything that looks like a secret (no secret known by value)."""
    return Redactor().redact_text(text)


class Redactor:
    """The secrets of one run and their removal (see the module's docstring for what is removed)."""

    def __init__(self, known: KnownStrings | None = None, local: KnownStrings | None = None) -> None:
        self._known = known if known is not None else KnownStrings()
        self._local = local

    def add(self, *values: str | None) -> None:
        """Know these values as secrets (None, and values too short to be one, are skipped)."""
        self._known.add(form for value in values if value for form in _forms(value))

    def knows(self, *values: str | None) -> bool:
        """Whether every one of these values is already known as a secret (`add` would learn nothing)."""
        return all(form in self._known for value in values if value for form in _forms(value))

    def known(self) -> frozenset[str]:
        """What this redactor knows now, as `knowing` takes it (for another process, say)."""
        return self._known.snapshot()

    @classmethod
    def knowing(cls, known: frozenset[str]) -> Redactor:
        """A redactor that knows what another `known` now, and learns on its own from then on."""
        return cls(KnownStrings(known))

    def within(self, *values: str | None) -> Redactor:
        """A redactor that removes these values too (the secrets of one exchange, say), besides
        every secret this one knows now and learns later; this one does not learn them."""
        return Redactor(self._known, KnownStrings(form for value in values if value for form in _forms(value)))

    def redact_text(self, text: str) -> str:
        spans = self._known.spans(text) + (self._local.spans(text) if self._local is not None else [])
        if spans:
            text = _blank(text, spans)
        if any(start in text for start in _SECRET_TEXT_STARTS):
            text = _SECRET_TEXT.sub(REDACTED, text)
        return text

    def redact(self, value: Any) -> Any:
        """A copy of `value` with every secret replaced by `<redacted>`."""
        if isinstance(value, dict):
            if _is_mcp_tool(value):
                value = value | {"headers": dict.fromkeys(value["headers"], REDACTED)}
            return {key: REDACTED if _is_secret_key(key) and item is not None else self.redact(item)
                    for key, item in value.items()}
        if isinstance(value, list):
            return [self.redact(item) for item in value]
        if isinstance(value, str):
            return self.redact_text(value)
        return value

    def write_json(self, path: Path, value: Any) -> None:
        path.write_text(json.dumps(self.redact(value), indent=2) + "\n")

    def write_text(self, path: Path, text: str) -> None:
        path.write_text(self.redact_text(text))

    def rewrite_log(self, path: Path) -> None:
        """The text file at `path` (a gateway's log, of any size: the gateway wrote it) rewritten
        without a secret, a line at a time; a line longer than `MAX_LOG_LINE_BYTES` is left out,
        named by its size, as it could not be redacted without being read whole."""
        partial = path.with_name(f"{path.name}.redacting")
        with path.open("rb") as source, partial.open("w", encoding="utf-8") as sink:
            while line := source.readline(MAX_LOG_LINE_BYTES + 1):
                if len(line) <= MAX_LOG_LINE_BYTES:
                    sink.write(self.redact_text(line.decode("utf-8", errors="replace")))
                    continue
                size = len(line)
                while not line.endswith(b"\n") and (line := source.readline(MAX_LOG_LINE_BYTES + 1)):
                    size += len(line)
                sink.write(f"[a line of {size:,} bytes, longer than the {MAX_LOG_LINE_BYTES:,} a log line is "
                           "redacted up to, left out]\n")
        partial.replace(path)


class RedactedStream:
    """A text stream that passes what is written to `stream` through a redactor. Each write is
    redacted on its own: a secret split across two writes is not caught (a rich console writes
    each `print` at once)."""

    def __init__(self, stream: TextIO, redactor: Redactor) -> None:
        self._stream = stream
        self._redactor = redactor

    def write(self, text: str) -> int:
        self._stream.write(self._redactor.redact_text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def tool_secrets(data: Any) -> list[str]:
    """The values a request body (`data`) holds where OpenAI's API puts secrets: the
    `authorization` and the header values of its MCP tools, wherever they sit."""
    found: list[str] = []
    pending = [data]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if node.get("type") == "mcp":
                headers = node.get("headers")
                found += [value for value in (node.get("authorization"),
                                              *(headers.values() if isinstance(headers, dict) else ()))
                          if isinstance(value, str)]
            pending += node.values()
        elif isinstance(node, list):
            pending += node
    return found


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each of `spans` replaced by `<redacted>`, overlapping ones as one."""
    parts, kept_from = [], 0
    for start, end in sorted(spans):
        if start < kept_from:  # overlaps the span before: that one reaches further
            kept_from = max(kept_from, end)
            continue
        parts += [text[kept_from:start], REDACTED]
        kept_from = end
    return "".join(parts) + text[kept_from:]


def _is_secret_key(key: Any) -> bool:
    return isinstance(key, str) and key.lower() in SECRET_KEYS


def _is_mcp_tool(value: dict[Any, Any]) -> bool:
    """An MCP tool with headers (all of whose values are secrets)."""
    return value.get("type") == "mcp" and isinstance(value.get("headers"), dict)


def _forms(value: str) -> set[str]:
    """The forms of the secret `value` looked for: the value, the token of a credential, the
    parts of a Basic one; each as it is, JSON-escaped and percent-encoded."""
    values = {value}
    if credential := _CREDENTIAL.fullmatch(value.strip()):
        scheme, token = credential.groups()
        values.add(token)
        if scheme.lower() == "basic":
            values |= _basic_parts(token)
    return {form for secret in values if len(secret) >= MIN_SECRET_LENGTH and secret not in REDACTED
            for form in (secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
                         quote(secret, safe=""))}


def _basic_parts(token: str) -> set[str]:
    """`user:password` and the password a Basic credential encodes (none if it encodes none)."""
    try:
        decoded = base64.b64decode(token, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return set()
    return {decoded, decoded.partition(":")[2]} if ":" in decoded else set()

"""Defaults the CLI, the pytest plugin and the engine share, each written once, in a module
that imports nothing heavy: pytest reads the plugin's options in every run, used or not."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

Mode = Literal["nonstream", "stream", "websocket"]
MODES: tuple[Mode, ...] = ("nonstream", "stream", "websocket")
"""How a unit sends its creates: as JSON, as a server-sent event stream, or over a WebSocket
(OpenAI's WebSocket mode, which streams)."""
HTTP_MODES: tuple[Mode, ...] = ("nonstream", "stream")
"""The modes a run takes unless told otherwise (`--mode all` adds the WebSocket)."""
LOOPBACK = "127.0.0.1"
REFERENCE = "reference"
"""The target that is the embedded reference gateway."""
DEFAULT_UPSTREAM_PORT = 8642
DEFAULT_UPSTREAM_URL = f"http://{LOOPBACK}:{DEFAULT_UPSTREAM_PORT}"
DEFAULT_MODEL = "parity-model"
DEFAULT_RESPONSES_PATH = "/v1/responses"
DEFAULT_CHAT_PATH = "/v1/chat/completions"
DEFAULT_TIMEOUT_S = 60.0
"""From sending a request to the last byte of its answer."""
DEFAULT_MAX_ANSWER_BYTES = 4 * 2**20
"""A scenario's answers are kilobytes (a live model's long stream about 1 MB); reading and
checking an answer costs about a second per 3 MB on a busy 2-core machine, so the limit also
bounds how long a run outlives its timeout."""
DEFAULT_GOLDEN_DIR = Path("fixtures/goldens")
"""Where `parity record` writes golden sets, and where `--against` looks first."""



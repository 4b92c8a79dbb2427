"""A JSON value that is costly to compute, kept in a file: built once, written atomically (a
temporary file renamed into place, so a reader never sees half a file and writers racing
each other leave one whole file), and built again, never an error, when the file is missing,
unreadable or not what is expected. A cache that cannot be written is only slower. The harness
and the reference gateway keep theirs in one folder (`cache_dir`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from platformdirs import user_cache_path

from .documents import read_json


def cache_dir() -> Path:
    """Where the tool keeps what it builds once (gateway installs, the SDK's schemas):
    `PARITY_CACHE_DIR`, else the user's cache folder as the platform names it
    (`$XDG_CACHE_HOME/responses-parity`, by default `~/.cache/responses-parity`, on Linux)."""
    return Path(os.environ.get("PARITY_CACHE_DIR") or user_cache_path("responses-parity", appauthor=False))


def sdk_cache_file(folder: str, source: str) -> Path:
    """The file in `folder` for what the module at `source` derives from the installed `openai`
    SDK: named after the openai and pydantic versions and a hash of that module, so a new SDK,
    pydantic or deriving code derives it anew."""
    code = hashlib.sha256(Path(source).read_bytes()).hexdigest()[:16]
    versions = f"openai-{metadata.version('openai')}-pydantic-{metadata.version('pydantic')}"
    return cache_dir() / folder / f"{versions}-{code}.json"


def load_or_build(path: Path, build: Callable[[], Any], accept: Callable[[Any], bool]) -> Any:
    """The value in `path` if it reads as JSON and `accept` takes it, else `build()`, saved there."""
    try:
        value = read_json(path)
    except (OSError, ValueError):
        pass
    else:
        if accept(value):
            return value
    value = build()
    _write_atomically(path, json.dumps(value))
    return value


def _write_atomically(path: Path, text: str) -> None:
    temporary: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp", delete=False) as file:
            temporary = file.name
            file.write(text)
        os.replace(temporary, path)
    except OSError:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)

"""The reports' Jinja2 templates (`harness/templates/`), their compiled code kept in the tool's
cache folder (`cache_dir`), as Jinja2's bytecode cache keeps it: compiling report.html.j2 and
the charts it imports took 25 ms of every run. Jinja2 compiles a template again when its source
changed (the cache holds a checksum of it) or when the Python version did; the folder is named
after the Jinja2 version. A cache that cannot be read or written is only slower."""

from __future__ import annotations

import contextlib
import pickle
from pathlib import Path
from typing import Any

import jinja2
from jinja2.bccache import Bucket

from ...openai_contract.json_cache import cache_dir


class _KeptCompiled(jinja2.FileSystemBytecodeCache):
    """Jinja2's file cache of compiled templates, which creates its folder and never fails a
    render: an entry that cannot be read is compiled again, one that cannot be written is not kept."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError):
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):
            Path(self.directory).mkdir(parents=True, exist_ok=True)
            super().dump_bytecode(bucket)


def environment(**options: Any) -> jinja2.Environment:
    """A Jinja2 environment of the report templates, set with `options`."""
    kept = _KeptCompiled(str(cache_dir() / "templates" / f"jinja2-{jinja2.__version__}"))
    return jinja2.Environment(loader=jinja2.PackageLoader("responses_parity.harness", "templates"),
                              bytecode_cache=kept, **options)

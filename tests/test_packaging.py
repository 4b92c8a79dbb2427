"""The wheel ships every package of the source tree: a subpackage missing from pyproject's list
works in an editable install and is absent from a real one."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    folders = {name: ROOT / folder for name, folder in setuptools["package-dir"].items()}
    found = {f"{name}.{'.'.join(init.parent.relative_to(folder).parts)}".rstrip(".")
             for name, folder in folders.items() for init in folder.rglob("__init__.py")}
    assert found - listed == set()

"""The wheel ships every package and data file of the source tree: one missing from pyproject's
lists works in an editable install and is absent from a real one."""

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


def test_the_target_profiles_and_their_locks_are_package_data() -> None:
    """An installed (non-editable) tool finds every shipped profile and lock."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    harness = ROOT / setuptools["package-dir"]["responses_parity.harness"]
    shipped = {path for pattern in setuptools["package-data"]["responses_parity.harness"]
               for path in harness.glob(pattern)}
    gateways = {path for path in (harness / "gateways").rglob("*") if path.is_file()}
    assert any(path.parent.name == "locks" for path in gateways)
    assert gateways - shipped == set()

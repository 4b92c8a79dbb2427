"""The harness's layout is its architecture: bytes are read (`wire`), answers are modelled
(`model`: contracts, findings), a scenario file is read with the expectations that judge them
(`scenario`), results are judged (`judge`), produced by running scenarios
(`engine`), then reported, replayed, benchmarked and probed, and the commands and the pytest
plugin sit on top. A module imports only its own package and the floors below it, never a
sibling on its own floor; and the harness never imports the reference gateway it judges, save
the one module that starts it as the default target."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"

FLOORS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "defaults", "options"}),
    frozenset({"wire"}),
    frozenset({"model"}),
    frozenset({"scenario"}),
    frozenset({"judge"}),
    frozenset({"engine"}),
    frozenset({"report", "traffic", "bench", "probe"}),
    frozenset({"commands"}),
    frozenset({"cli", "__main__", "pytest_plugin", "pytest_scenarios", "__init__"}),
)
"""Bottom to top; a name is a package of the harness or a module at its root."""
MUTUAL = (FLOORS[0], frozenset({"cli", "__main__", "pytest_plugin", "pytest_scenarios"}))
"""Floors whose modules may import one another: the declarations at the bottom (errors,
defaults, options), and the tool's faces at the top."""
REFERENCE_GATEWAY_SEAM = "engine.reference_gateway"
"""The one module that may import `reference_impl`: it starts the reference gateway as a target."""


def _floor(part: str) -> int:
    return next(index for index, names in enumerate(FLOORS) if part in names)


def _imports(module: str, source: str) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import in `source`, in functions too, as a dotted
    name below the installed namespace (`harness.wire.sse`, `reference_impl.errors`)."""
    package = module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["harness", *package][: len(package) + 2 - node.level]
                names = [".".join([*base, node.module])] if node.module else \
                    [".".join([*base, alias.name]) for alias in node.names]
            else:
                names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            name = name.removeprefix("responses_parity.")
            if name.split(".")[0] in ("harness", "reference_impl"):
                yield node.lineno, name


def violations(sources: Mapping[str, str]) -> list[str]:
    """Every import that breaks the layout, as `module:line imports name (why)`; `sources`
    maps a harness module's dotted name below `harness` (`engine.runner`) to its code."""
    found = []
    for module, source in sources.items():
        own = module.split(".")[0]
        for line, name in _imports(module, source):
            where = f"harness.{module}:{line} imports {name}"
            parts = name.split(".")
            if parts[0] == "reference_impl":
                if module != REFERENCE_GATEWAY_SEAM:
                    found.append(f"{where} (the harness judges the reference gateway; only "
                                 f"{REFERENCE_GATEWAY_SEAM} starts it)")
                continue
            if len(parts) == 1:
                continue  # the harness package itself
            theirs = parts[1]
            if theirs == own or theirs not in {part for floor in FLOORS for part in floor}:
                continue
            if _floor(theirs) > _floor(own):
                found.append(f"{where} (a layer above its own)")
            elif _floor(theirs) == _floor(own) and not any({own, theirs} <= mutual for mutual in MUTUAL):
                found.append(f"{where} (a sibling on its own floor)")
    return found


def _harness_sources() -> dict[str, str]:
    return {".".join(path.relative_to(HARNESS).with_suffix("").parts): path.read_text()
            for path in HARNESS.rglob("*.py")}


def test_every_module_of_the_harness_sits_on_a_floor() -> None:
    parts = {module.split(".")[0] for module in _harness_sources()}
    assert parts <= {part for floor in FLOORS for part in floor}, parts


def test_no_module_imports_a_layer_above_it_a_sibling_or_the_reference_gateway() -> None:
    assert violations(_harness_sources()) == []


def test_the_layout_check_names_an_import_upwards_sideways_and_into_the_gateway() -> None:
    sources = {"judge.compare": "from ..engine.runner import Engine\n",
               "report.matrix": "def f():\n    from ..traffic import proxy\n",
               "wire.decode": "from ...reference_impl.documents import read_json\n",
               "engine.runner": "from ..judge.compare import compare\nfrom ..wire.sse import parse\n",
               REFERENCE_GATEWAY_SEAM: "from ...reference_impl import build_gateway_app\n",
               "pytest_plugin": "from .pytest_scenarios import session_of\n"}
    assert violations(sources) == [
        "harness.judge.compare:1 imports harness.engine.runner (a layer above its own)",
        "harness.report.matrix:2 imports harness.traffic (a sibling on its own floor)",
        "harness.wire.decode:1 imports reference_impl.documents (the harness judges the reference gateway; "
        f"only {REFERENCE_GATEWAY_SEAM} starts it)",
    ]

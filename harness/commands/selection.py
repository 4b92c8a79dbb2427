"""What a command of `running` hands `executing`: the scenarios it selected, read, and how the
run talks to its user."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..options import TargetOptions

if TYPE_CHECKING:
    from ..engine.stack_process import StackProcess
    from ..scenario.loader import Catalogue, LoadedScenario
    from ..scenario.model import Mode


@dataclass(frozen=True)
class Conventions:
    """How a run talks to its user, as pytest users expect."""

    verbose: int = 0
    quiet: int = 0
    json_document: bool = False
    """The results document on standard output; everything for people on standard error."""
    exitfirst: bool = False
    junitxml: Path | None = None


@dataclass(frozen=True)
class Selection:
    """What a command runs: the catalogue (its unreadable files named already), the units it
    selects, the target and how many units run at once."""

    catalogue: Catalogue
    units: list[tuple[LoadedScenario, Mode]]
    options: TargetOptions
    jobs: int
    servers: StackProcess | None = None
    """The embedded reference gateway's servers, their process begun before the scenario files
    were read (see `running._servers_ahead`); None for another target."""

    @property
    def mcp_names(self) -> set[str]:
        """The MCP fixtures its units name."""
        return {name for loaded, _ in self.units for name in loaded.scenario.fixtures}

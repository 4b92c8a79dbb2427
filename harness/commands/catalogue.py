"""What the tool reads before running anything: scenario files (`list`, `validate`), their
JSON Schema (`schema`) and a scenarios folder to start from (`init`). Target profiles are
`profiles.py`'s, so what runs scenarios does not import what locks and installs gateways."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import click
from rich.markup import escape

from ..errors import did_you_mean
from ..options import LIST_TAG
from ..scenario.loader import Catalogue, LoadedScenario, builtin_scenarios_dir, load
from ..scenario.model import scenario_json_schema
from .click_options import click_options, json_option
from .console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, err, error, out

SCHEMA_FILE = "scenario.schema.json"
EXAMPLE_FILE = "example-mcp-call.yaml"


def load_catalogue(paths: tuple[Path, ...]) -> Catalogue:
    """The scenarios under `paths` (default: the built-in ones); each file that cannot be
    loaded is an error line."""
    catalogue = load(paths or (builtin_scenarios_dir(),))
    for problem in catalogue.errors:
        error(str(problem))
    return catalogue


def selected(catalogue: Catalogue, ids: tuple[str, ...], tags: tuple[str, ...]) -> list[LoadedScenario]:
    """The scenarios of `catalogue` that `ids` and `tags` select; an id or tag no scenario has is
    a usage error naming the closest known ones."""
    for what, asked, known in (("id", ids, {loaded.scenario.id for loaded in catalogue.scenarios}),
                               ("tag", tags, {tag for loaded in catalogue.scenarios for tag in loaded.scenario.tags})):
        if unknown := sorted(set(asked) - known):
            raise click.UsageError(f"no scenario with {what} "
                                   + ", ".join(name + did_you_mean(name, known) for name in unknown))
    return catalogue.select(ids, tags)


def _problems(catalogue: Catalogue) -> list[dict[str, str]]:
    """The files of `catalogue` that could not be loaded, as `--json` shows them."""
    return [{"path": str(problem.path), "message": problem.message} for problem in catalogue.errors]


@click.command("list")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click_options(LIST_TAG)
@json_option("Print one JSON object on standard output: scenarios (each with id, title, modes, tags and path) and "
             "problems (each file that could not be loaded: path and message); the rest goes to standard error.")
def list_command(paths: tuple[Path, ...], tags: tuple[str, ...], as_json: bool) -> None:
    """List scenarios: id, modes, tags and title."""
    catalogue = load_catalogue(paths)
    console = err if as_json else out
    listed = selected(catalogue, (), tags)
    for loaded in listed:
        scenario = loaded.scenario
        console.print(f"[bold]{scenario.id}[/bold] [dim]{'/'.join(scenario.modes)} · {', '.join(scenario.tags)}[/dim]")
        console.print(f"    {scenario.title}", soft_wrap=True)
    if as_json:
        click.echo(json.dumps({"scenarios": [{"id": loaded.scenario.id, "title": loaded.scenario.title,
                                              "modes": list(loaded.scenario.modes), "tags": list(loaded.scenario.tags),
                                              "path": str(loaded.path)} for loaded in listed],
                               "problems": _problems(catalogue)}, indent=2))
    sys.exit(EXIT_USAGE if catalogue.errors else EXIT_OK)


@click.command("validate")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@json_option("Print one JSON object on standard output: valid (how many scenarios loaded), scenarios (each with id "
             "and path) and problems (each with path and message); the rest goes to standard error.")
def validate(paths: tuple[Path, ...], as_json: bool) -> None:
    """Check scenario files; print one line per problem."""
    catalogue = load_catalogue(paths)
    (err if as_json else out).print(f"{len(catalogue.scenarios)} scenario(s) valid, {len(catalogue.errors)} problem(s)")
    if as_json:
        click.echo(json.dumps({"valid": len(catalogue.scenarios),
                               "scenarios": [{"id": loaded.scenario.id, "path": str(loaded.path)}
                                             for loaded in catalogue.scenarios],
                               "problems": _problems(catalogue)}, indent=2))
    sys.exit(EXIT_USAGE if catalogue.errors else EXIT_OK)


def _schema_text() -> str:
    return json.dumps(scenario_json_schema(), indent=2) + "\n"


@click.command("init")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path), default=Path("scenarios"))
@click.option("--force", is_flag=True, help="Overwrite the files if they exist.")
def init_command(folder: Path, force: bool) -> None:
    """Write a scenarios folder (default: ./scenarios): the scenario JSON Schema and, beside it,
    an example scenario whose first line points editors at it, so the reference works from any
    folder. `parity run FOLDER` then runs the example; it passes against the reference gateway."""
    files = {folder / SCHEMA_FILE: _schema_text(),
             folder / EXAMPLE_FILE: resources.files("responses_parity.harness").joinpath(
                 "templates", "example-scenario.yaml").read_text(encoding="utf-8")}
    if not force and (existing := [path for path in files if path.exists()]):
        error(f"{', '.join(map(str, existing))} already exist{'s' if len(existing) == 1 else ''}; "
              "pass --force to overwrite")
        sys.exit(EXIT_USAGE)
    folder.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    out.print(f"wrote {escape(str(folder / SCHEMA_FILE))} and {escape(str(folder / EXAMPLE_FILE))}; "
              f"run the example with: parity run {escape(str(folder))}", soft_wrap=True)


@click.command("schema")
@click.option("--check", is_flag=True, help="Exit 1 if the shipped schema (or --output) is out of date.")
@click.option("--output", type=click.Path(path_type=Path), default=None,
              help=f"Where to write it (default: {SCHEMA_FILE} in the current folder).")
def schema(check: bool, output: Path | None) -> None:
    """Write the JSON Schema of scenario files, for your editor to check your own scenarios
    (`scenario.schema.json` here, unless --output says where)."""
    text = _schema_text()
    if check:
        path = output or builtin_scenarios_dir() / SCHEMA_FILE
        current = path.read_text() if path.exists() else ""
        if current != text:
            err.print(f"{path} is out of date; run `parity schema --output {path}`", soft_wrap=True)
            sys.exit(EXIT_FAILED)
        out.print(f"{path} is up to date")
        return
    path = output or Path(SCHEMA_FILE)
    path.write_text(text)
    out.print(f"wrote {path}")

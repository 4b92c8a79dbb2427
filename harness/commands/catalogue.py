"""What the tool reads before running anything: scenario files (`list`, `validate`), their
JSON Schema (`schema`), a scenarios folder to start from (`init`) and target profiles
(`profiles`)."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from ..engine.locks import lock_command, lock_paths, read_lock, write_locks
from ..engine.profile import ProfileError, find_profile, no_such_profile, profile_paths
from ..errors import did_you_mean
from ..options import LIST_TAG, PROFILE_DIR
from ..scenario.loader import Catalogue, LoadedScenario, builtin_scenarios_dir, load
from ..scenario.model import scenario_json_schema
from .click_options import click_options, json_option
from .console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, err, error, out, say

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


@click.group("profiles", invoke_without_command=True)
@click_options(PROFILE_DIR)
@json_option("Print one JSON object on standard output: profiles (each with name, path, title, lock: the lock "
             "file or null, lock_command: how to write a missing lock or null, lacks: capability -> why) and "
             "broken (each with name, path and problem); the rest goes to standard error.")
@click.pass_context
def profiles_command(ctx: click.Context, profile_dirs: tuple[Path, ...], as_json: bool) -> None:
    """List the target profiles (shipped, and in --profile-dir folders) and their locks; exit 2
    if one is broken."""
    if ctx.invoked_subcommand is not None:
        return
    console = err if as_json else out
    listed: list[dict[str, Any]] = []
    broken: list[dict[str, str]] = []
    for name, path in profile_paths(profile_dirs).items():
        try:
            profile = find_profile(name, profile_dirs)
        except ProfileError as problem:
            error(str(problem))
            broken.append({"name": name, "path": str(path), "problem": str(problem)})
            continue
        assert profile is not None
        console.print(f"[bold]{name}[/bold] [dim]{escape(str(path))}[/dim]")
        console.print(f"    {escape(profile.title)}", soft_wrap=True)
        lock, command = None, None
        if profile.install is not None and (profile.install.packages or profile.install.downloads):
            lock = lock_paths(profile)[0 if profile.install.packages else 1]
            if not lock.is_file():
                lock, command = None, lock_command(profile)
            console.print(f"    [dim]lock: {escape(str(lock))}[/dim]" if lock else
                          f"    [yellow]no lock[/yellow]: {escape(command or '')}", soft_wrap=True)
        for capability, why in profile.lacks.items():
            console.print(f"    [dim]lacks {capability}: {escape(why)}[/dim]", soft_wrap=True)
        listed.append({"name": name, "path": str(path), "title": profile.title, "lock": lock and str(lock),
                       "lock_command": command, "lacks": dict(profile.lacks)})
    if as_json:
        click.echo(json.dumps({"profiles": listed, "broken": broken}, indent=2))
    sys.exit(EXIT_USAGE if broken else EXIT_OK)


@profiles_command.command("lock")
@click.argument("target")
@click_options(PROFILE_DIR)
def lock_profile(target: str, profile_dirs: tuple[Path, ...]) -> None:
    """Write the locks of a profile (`smg`, `smg@1.14.0`, a profile file): every package it
    installs, resolved for its Python on Linux x86_64 with the hash of every file, in `locks/`
    beside the profile file. Review the lock like code: it is what the install runs."""
    try:
        profile = find_profile(target, profile_dirs)
        if profile is None:
            raise no_such_profile(target, profile_dirs)
        say(f"resolving {profile.name}{'@' + profile.version if profile.version else ''} with uv ...")
        written = write_locks(profile)
    except ProfileError as problem:
        error(str(problem))
        sys.exit(EXIT_USAGE)
    for path in written:
        pins = read_lock(path).pins
        out.print(f"wrote {escape(str(path))} ({len(pins)} package{'s' if len(pins) != 1 else ''}); review it and "
                  "commit it with the profile", soft_wrap=True)


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

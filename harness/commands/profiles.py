"""`parity profiles`: the target profiles (shipped, and in --profile-dir folders) and their
locks, and `parity profiles lock`, which writes a profile's locks."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from ..engine.locks import lock_command, lock_paths, read_lock, write_locks
from ..engine.profile import ProfileError, find_profile, no_such_profile, profile_paths
from ..options import PROFILE_DIR
from .click_options import click_options, json_option
from .console import EXIT_OK, EXIT_USAGE, err, error, out, say


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

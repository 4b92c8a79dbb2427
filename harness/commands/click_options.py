"""The declared options (`harness/options.py`) as click options: `--NAME`, its one-letter
form, its help, type, bounds, default and environment variable, the value passed to the
command as `dest`; and `--json`, declared here once for every command that has it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..options import Option

Command = TypeVar("Command", bound=Callable[..., Any])


def _click_type(option: Option) -> Any:
    if option.choices:
        return click.Choice(option.choices)
    if option.type is Path:
        return click.Path(path_type=Path)
    if option.type in (int, float) and (option.minimum is not None or option.maximum is not None):
        bounds = click.IntRange if option.type is int else click.FloatRange
        return bounds(min=option.minimum, max=option.maximum, min_open=option.minimum_open)
    return option.type


def click_options(*options: Option) -> Callable[[Command], Command]:
    """A decorator adding `options` to a command, in this order in its help."""
    def add(function: Command) -> Command:
        for option in reversed(options):
            names = [f"--{option.name}", *([option.short] if option.short else [])]
            function = click.option(*names, option.dest, type=_click_type(option), multiple=option.multiple,
                                    default=() if option.multiple else option.default, metavar=option.metavar,
                                    show_default=option.default is not None and not option.multiple,
                                    envvar=option.env, required=option.required,
                                    help=option.described())(function)
        return function

    return add


def json_option(help: str) -> Callable[[Command], Command]:
    """`--json`: a flag passed to the command as `as_json`; `help` says what it prints."""
    return click.option("--json", "as_json", is_flag=True, help=help)

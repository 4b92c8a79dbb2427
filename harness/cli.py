"""`parity`: run scenarios against a gateway, list and validate them, serve the fixtures.

Exit codes of `parity run`: 0 every scenario passed (or is unsupported by the target); 1 a
scenario failed; 2 a usage error (a selection that matches nothing among them), a target that
cannot be started or reached, a broken scenario file or a scenario that could not run (even
when others also failed). When nothing could run at all, the previous report stays in place.
`parity matrix` exits 1 only when a target could not run at all.

Each command lives in a module of `harness/commands/` and is imported only when it is invoked
(or when `--help` lists them), so `parity --version` and `parity check-exchange` do not load the
gateway, the fixtures and the SDKs behind them. To add a command, write it as a `click`
command in such a module and name it in `COMMANDS`.
"""

from __future__ import annotations

from importlib import import_module

import click

COMMANDS = {
    "baseline": "golden:baseline_group",
    "bench": "bench:bench_command",
    "check-exchange": "check_exchange:check_exchange",
    "golden": "golden:golden_group",
    "init": "catalogue:init_command",
    "list": "catalogue:list_command",
    "matrix": "running:matrix_command",
    "probe": "probe:probe_command",
    "profiles": "catalogue:profiles_command",
    "proxy": "traffic:proxy_command",
    "record": "running:record",
    "replay": "traffic:replay_command",
    "run": "running:run",
    "scenario": "traffic:scenario_group",
    "schema": "catalogue:schema",
    "serve": "serve:serve",
    "validate": "catalogue:validate",
    "wait": "wait:wait_command",
}
"""Command name -> `module:attribute` in `responses_parity.harness.commands`."""


class LazyGroup(click.Group):
    """A group whose commands, named in `COMMANDS`, are imported when first needed (click's
    documented lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = COMMANDS[cmd_name].partition(":")
        command = getattr(import_module(f"{__package__}.commands.{module}"), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"COMMANDS[{cmd_name!r}] names {command!r}, not a click command")
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="responses-parity", prog_name="parity")
def main() -> None:
    """Contract-level parity checks for OpenAI-compatible Responses API gateways."""

"""`parity`: run scenarios against a gateway, list and validate them, serve the fixtures.

Exit codes of `parity run`: 0 every scenario passed (or is unsupported by the target); 1 a
scenario failed; 2 a usage error (a selection that matches nothing among them), a target that
cannot be started or reached, a broken scenario file or a scenario that could not run (even
when others also failed). When nothing could run at all, the previous report stays in place.
`parity matrix` exits 1 only when a target could not run at all.

Each command lives in a module of `harness/commands/` and is imported only when it is invoked
(`parity -h` lists them from `COMMANDS`), so `parity -h`, `parity --version` and `parity
check-exchange` do not load the gateway, the fixtures and the SDKs behind them. To add a
command, write it as a `click` command in such a module and name it in `COMMANDS` with the
start of its help (tests/harness/test_cli.py holds the two together).
"""

from __future__ import annotations

from importlib import import_module

import click

COMMANDS = {
    "baseline": ("golden:baseline_group", "Known divergences of a target, so CI fails only on new or worse ones."),
    "bench": ("bench:bench_command", "Measure what gateways add to each model turn"),
    "check-exchange": ("check_exchange:check_exchange", "Run every no-reference check (SDK schema, stream grammar) "
                                                        "on exchange files."),
    "golden": ("golden:golden_group", "Work with recorded golden sets."),
    "init": ("catalogue:init_command", "Write a scenarios folder"),
    "list": ("catalogue:list_command", "List scenarios: id, modes, tags and title."),
    "matrix": ("running:matrix_command", "Run the same scenarios against several gateways"),
    "merge": ("merge:merge_command", "Put the parts of a split run, matrix or probe run back together"),
    "probe": ("probe:probe_command", "Send generated request probes"),
    "profiles": ("profiles:profiles_command", "List the target profiles"),
    "proxy": ("traffic:proxy_command", "Forward a client's traffic to UPSTREAM unchanged"),
    "record": ("running:record", "Run scenarios and save every exchange and its contract as goldens"),
    "replay": ("traffic:replay_command", "Send the captured requests"),
    "run": ("running:run", "Run scenarios (default: the built-in ones) against a target"),
    "scenario": ("traffic:scenario_group", "Work with scenario files."),
    "schema": ("catalogue:schema", "Write the JSON Schema of scenario files"),
    "serve": ("serve:serve", "Serve the scripted upstream, the MCP fixtures and the search fixture on loopback"),
    "validate": ("catalogue:validate", "Check scenario files; print one line per problem."),
    "wait": ("wait:wait_command", "Wait until each URL answers a GET"),
}
"""Command name -> `module:attribute` in `responses_parity.harness.commands`, and the start of
its help, which `parity -h` lists without importing the command."""


class LazyGroup(click.Group):
    """A group whose commands, named in `COMMANDS`, are imported when first needed (click's
    documented lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and the start of their help, from `COMMANDS` (nothing is imported)."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, summary) in sorted(COMMANDS.items())])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = COMMANDS[cmd_name][0].partition(":")
        command = getattr(import_module(f"{__package__}.commands.{module}"), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"COMMANDS[{cmd_name!r}] names {command!r}, not a click command")
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="responses-parity", prog_name="parity")
def main() -> None:
    """Contract-level parity checks for OpenAI-compatible Responses API gateways."""

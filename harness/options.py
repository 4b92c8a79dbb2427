"""The options of the `parity` commands, declared once: what to run, against which target,
judged how, and the options other commands have under the same names (a variant with another
default or help is a `replace` of the declaration it varies). The `parity` commands and the
pytest plugin build their options from these declarations (the command line's `--NAME` is
pytest's `--parity-NAME`), and both turn what they parsed into `TargetOptions` with
`target_options`, so names, help, types, bounds, defaults and environment variables cannot
drift apart. How a command talks to its user (`--json`, `-q`, `-x`, `--junitxml`) is not
declared here: pytest has those options of its own (`--json` is declared once, in
`commands/click_options.py`).

pytest imports this module in every run of every project that installs the package, used or
not, so it imports nothing but the standard library."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .defaults import (DEFAULT_CHAT_PATH, DEFAULT_GOLDEN_DIR, DEFAULT_MAX_ANSWER_BYTES, DEFAULT_MODEL,
                       DEFAULT_RESPONSES_PATH, DEFAULT_TIMEOUT_S, DEFAULT_UPSTREAM_URL, HTTP_MODES, MODES, REFERENCE,
                       Mode)

_MB = 2**20


@dataclass(frozen=True)
class Option:
    """One option: `--NAME` on the command line, `--parity-NAME` in pytest; its parsed value
    is known by `dest`."""

    name: str
    help: str
    type: type = str
    """str, int, float or Path."""
    default: Any = None
    dest: str = ""
    """The value's name (default: `name` with underscores)."""
    multiple: bool = False
    """Given again to add a value; the value is the tuple of them."""
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    minimum_open: bool = False
    """The value must be above `minimum` rather than at least it."""
    maximum: float | None = None
    env: str | None = None
    """The environment variable read when the option is not given."""
    metavar: str | None = None
    short: str | None = None
    """A one-letter form on the command line (pytest keeps those for itself)."""
    required: bool = False
    """The command refuses to run without it (the command line only: pytest runs without it)."""

    def __post_init__(self) -> None:
        if not self.dest:
            object.__setattr__(self, "dest", self.name.replace("-", "_"))

    @property
    def pytest_flag(self) -> str:
        """The option's name in pytest."""
        return f"--parity-{self.name}"

    @property
    def pytest_dest(self) -> str:
        """Where pytest keeps the option's value (`config.getoption`)."""
        return f"parity_{self.dest}"

    def parse(self, text: str) -> Any:
        """The value `text` gives this option; `ValueError` says what is wrong with it."""
        try:
            value = self.type(text)
        except ValueError:
            raise ValueError(f"{text!r} is not {'an integer' if self.type is int else 'a number'}") from None
        if self.choices and value not in self.choices:
            raise ValueError(f"{text!r} is not one of {', '.join(self.choices)}")
        if self.minimum is not None and (value <= self.minimum if self.minimum_open else value < self.minimum):
            raise ValueError(f"{text} is not {'above' if self.minimum_open else 'at least'} {self.minimum:g}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"{text} is above {self.maximum:g}")
        return value

    def described(self) -> str:
        """The help, with the environment variable it falls back on."""
        if not self.env:
            return self.help
        return f"{self.help.removesuffix('.')} (env {self.env})" + ("." if self.help.endswith(".") else "")


class OptionError(ValueError):
    """An option's value is wrong; each adapter names the option as its user wrote it."""

    def __init__(self, option: Option, problem: str) -> None:
        super().__init__(problem)
        self.option = option
        self.problem = problem


TARGET = Option("target", default=REFERENCE,
                help=f"'{REFERENCE}' (the embedded reference gateway), 'openai' (live: OPENAI_API_KEY, "
                     "OPENAI_BASE_URL, PARITY_OPENAI_MODEL), a target profile (smg, llama-stack, "
                     "open-responses-server, litellm, or a profile file: installed and started for the run) or a "
                     "running gateway's base URL.")
API_KEY = Option("api-key", env="PARITY_API_KEY", help="Sent to the target as a bearer token.")
HEADER = Option("header", dest="headers", multiple=True, metavar="'NAME: VALUE'",
                help="Extra request header sent to the target (repeatable).")
MODEL = Option("model", default=DEFAULT_MODEL, help="Model name sent in requests.")
RESPONSES_PATH = Option("responses-path", default=DEFAULT_RESPONSES_PATH,
                        help="Path of the target's Responses endpoint.")
CHAT_PATH = Option("chat-path", default=DEFAULT_CHAT_PATH, help="Path of the target's Chat Completions endpoint.")
TIMEOUT = Option("timeout", dest="timeout_s", type=float, default=DEFAULT_TIMEOUT_S, minimum=0, minimum_open=True,
                 help="Seconds one request may take, from sending it to the last byte of its answer.")
MAX_ANSWER_MB = Option("max-answer-mb", type=float, default=DEFAULT_MAX_ANSWER_BYTES / _MB, minimum=0,
                       minimum_open=True,
                       help="How much of one answer is read; a larger one is cut there (a finding).")
UPSTREAM = Option("upstream", default=DEFAULT_UPSTREAM_URL,
                  help="The scripted upstream a URL target talks to, with the MCP fixtures `parity serve` serves "
                       "beside it (both started there if nothing answers).")
PUBLIC_MCP = Option("public-mcp", multiple=True, metavar="NAME=URL",
                    help="Live runs: where `parity serve mcp NAME` is reachable from the internet (repeatable).")
RETRIES = Option("retries", type=int, minimum=0, maximum=10,
                 help="Resend a request answered 429/5xx or not at all (default: 2 for openai, else 0).")
PROFILE_DIR = Option("profile-dir", dest="profile_dirs", type=Path, multiple=True,
                     help="A folder of your own target profiles (repeatable; `parity profiles` lists them).")

SCENARIO = Option("scenario", dest="ids", short="-s", multiple=True, help="Run only this scenario id (repeatable).")
TAG = Option("tag", dest="tags", short="-t", multiple=True, help="Run only scenarios with this tag (repeatable).")
MODE = Option("mode", choices=("both", "all", *MODES), default="both",
              help="The modes to run: both HTTP ones (JSON and a server-sent event stream), all of them (the "
                   "WebSocket too), or one.")
JOBS = Option("jobs", short="-j", type=int, default=4, minimum=1, maximum=64, help="Scenario runs in parallel.")
REPORT_DIR = Option("report-dir", type=Path, default=Path("reports/latest"),
                    help="Where the report files go (replacing the previous run's).")

AGAINST = Option("against", metavar="golden:NAME",
                 help="Also compare every step's contract with a recorded golden set (offline).")
GOLDEN_DIR = Option("golden-dir", type=Path,
                    help=f"Where golden sets are (default: {DEFAULT_GOLDEN_DIR}, then the shipped ones).")
BASELINE = Option("baseline", dest="baseline_file", type=Path, metavar="FILE",
                  help="Known divergences of this target (`parity baseline update`): they fail nothing.")

TARGET_OPTIONS = (TARGET, API_KEY, HEADER, MODEL, RESPONSES_PATH, CHAT_PATH, TIMEOUT, MAX_ANSWER_MB, UPSTREAM,
                  PUBLIC_MCP, RETRIES, PROFILE_DIR)
"""What `target_options` reads."""
SELECTION_OPTIONS = (SCENARIO, TAG, MODE, JOBS, REPORT_DIR)
JUDGE_OPTIONS = (AGAINST, GOLDEN_DIR, BASELINE)
SHARD = Option("shard", metavar="I/N",
               help="Run only the I-th of N parts of the selection (split by scenario, the same on every machine); "
                    "`parity merge` puts the parts' reports together.")
SHARD_DURATIONS = Option("shard-durations", type=Path,
                         help="A previous run's results.json (or a matrix's matrix.json), whose durations balance "
                              "the shards; the same file on every machine.")
SHARD_OPTIONS = (SHARD, SHARD_DURATIONS)
PYTEST_OPTIONS = (*TARGET_OPTIONS, MODE, *JUDGE_OPTIONS, *SHARD_OPTIONS)
"""The options of the pytest plugin (`--parity-NAME`): pytest selects tests (`-k`), runs them
in parallel (`-n`, pytest-xdist) and reports (`--junitxml`) itself."""

RECORD_GOLDEN_DIR = replace(GOLDEN_DIR, default=DEFAULT_GOLDEN_DIR, help="Where the golden set is written.")
MATRIX_JOBS = replace(JOBS, default=2, help="Scenario runs in parallel against one target.")
MATRIX_TIMEOUT = replace(TIMEOUT, default=30.0,
                         help="Seconds one request may take (shorter than a run's: a matrix runs every target).")
MATRIX_UPSTREAM = replace(UPSTREAM, help="The scripted upstream the URL targets talk to, with the MCP fixtures "
                                         "`parity serve` serves beside it (both started there if nothing answers).")
MATRIX_REPORT_DIR = replace(REPORT_DIR, default=Path("reports/latest/matrix"),
                            help="Each target's full report goes to a folder of its name here.")

TARGETS = Option("targets", required=True, metavar="A,B,...",
                 help="Comma-separated targets: reference, profile names or files, base URLs (openai too).")

BENCH_TARGETS = replace(TARGETS, required=False, default=REFERENCE,
                        help="What to measure: 'reference' (the reference gateway, in a process of its own), target "
                             "profiles (smg, llama-stack, ...; installed and started against the run's upstream), "
                             "base URLs of running gateways pointed at --upstream, or 'proxy:' and one of those "
                             "(parity proxy in front of it, measured beside it alone).")
BENCH_UPSTREAM = replace(UPSTREAM, default=None, help="A running scripted upstream (`parity serve upstream`) that URL "
                                                      "targets talk to; default: the run starts one.")
BENCH_API_KEY = replace(API_KEY, help="Bearer token for URL targets.")
BENCH_HEADER = replace(HEADER, metavar=None, help="Extra header 'Name: value' for URL targets (repeatable).")
BENCH_TIMEOUT = replace(TIMEOUT, default=60.0, minimum=None, minimum_open=False, help="Seconds one request may take.")

PROBE_AGAINST = Option("against", default=REFERENCE, metavar="TARGET|DIR",
                       help="What the target is compared with: a target as --target takes it, or a folder of answers "
                            "written by --record (the reference gateway answers the probes it lacks).")
PROBE_TIMEOUT = replace(TIMEOUT, default=20.0, help="Seconds one probe may take, from sending it to the last byte "
                                                    "of its answer (a target that takes longer has hung).")
PROBE_JOBS = replace(JOBS, help="Probes in flight at once.")
PROBE_SHARD = replace(SHARD, help="Send only the I-th of N parts of the selected probes (dealt by id, the same on "
                                  "every machine); its --json document is the part `parity merge` puts together.")

PROXY_UPSTREAM = Option("upstream", required=True,
                        help="Base URL requests are forwarded to (a gateway's, or https://api.openai.com): "
                             "/v1/responses goes to <upstream>/v1/responses.")
SERVED_GATEWAY_UPSTREAM = Option("upstream", help="Model base URL, e.g. http://127.0.0.1:8642/v1 "
                                                  "(default: a scripted upstream started alongside).")
WAIT_TIMEOUT = replace(TIMEOUT, default=60.0, help="Seconds to wait for all of them together.")
LIST_TAG = replace(TAG, help="List only scenarios with this tag (repeatable).")


@dataclass(frozen=True)
class TargetOptions:
    target: str = TARGET.default
    """`reference` (the embedded reference gateway), `openai` (the live API: `OPENAI_BASE_URL`,
    `OPENAI_API_KEY`, model `PARITY_OPENAI_MODEL`), a target profile's name or file (a gateway
    the harness installs and starts), or the base URL of a running gateway."""
    api_key: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    model: str = MODEL.default
    responses_path: str = RESPONSES_PATH.default
    chat_path: str = CHAT_PATH.default
    timeout_s: float = TIMEOUT.default
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    upstream: str = UPSTREAM.default
    """The scripted upstream a URL target talks to, and the MCP fixtures it announces (those
    `parity serve` serves beside it); when nothing answers there, both are started here, on its
    port and the ones after it, as `parity serve` would."""
    public_mcp: tuple[tuple[str, str], ...] = ()
    """MCP fixture name -> a public base URL where `parity serve mcp <name>` is reachable (live runs)."""
    retries: int | None = None
    """Retries of a request answered 429, 5xx or not at all (default: 2 for openai, 0 otherwise)."""
    profile_dirs: tuple[Path, ...] = ()
    """Folders of the user's own target profiles (besides the shipped ones)."""


def parse_header(text: str) -> tuple[str, str]:
    """`Name: value` -> (name, value); raises `ValueError` naming the problem."""
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise ValueError(f"header {text!r} is not of the form 'Name: value'")
    return name.strip(), value.strip()


def target_options(values: Mapping[str, Any]) -> TargetOptions:
    """The target options from the values an adapter parsed, by `Option.dest` (the pytest
    plugin leaves the target None when not given); `OptionError` names a wrong one."""
    try:
        headers = tuple(parse_header(text) for text in values["headers"])
    except ValueError as problem:
        raise OptionError(HEADER, str(problem)) from problem
    public_mcp = [entry.partition("=") for entry in values["public_mcp"]]
    if bad := [name for name, sep, url in public_mcp if not sep or not name or "://" not in url]:
        raise OptionError(PUBLIC_MCP, f"{bad[0]!r}: write NAME=URL, e.g. calc=https://mcp.example.org")
    return TargetOptions(
        target=values["target"] or TARGET.default,
        api_key=values["api_key"] or os.environ.get(API_KEY.env or "") or None,
        headers=headers, model=values["model"], responses_path=values["responses_path"],
        chat_path=values["chat_path"], timeout_s=values["timeout_s"],
        max_answer_bytes=int(values["max_answer_mb"] * _MB), upstream=values["upstream"],
        public_mcp=tuple((name, url) for name, _, url in public_mcp), retries=values["retries"],
        profile_dirs=tuple(Path(folder) for folder in values["profile_dirs"]))


def modes(choice: str) -> tuple[Mode, ...]:
    """The modes `--mode` names."""
    return {"both": HTTP_MODES, "all": MODES}.get(choice) or tuple(mode for mode in MODES if mode == choice)

"""Install a profiled gateway into a virtual environment of its own, start it as a child
process, wait until it is ready, stop it.

The environment lives in a cache folder keyed by the install spec and the profile's locks
(`PARITY_CACHE_DIR`, default the user's cache folder: `json_cache.cache_dir`), so the first run installs exactly
what the locks pin (`harness/engine/locks.py`), later runs start at once, and a changed lock installs
anew. The child
runs in a process group of its own; stopping sends SIGTERM to that group, then SIGKILL after the
profile's grace period: only processes this harness started are ever signalled.

Every failure is a `HarnessError` that names the profile and ends with the tail of the log
(pip's or the gateway's).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from ...openai_contract.json_cache import cache_dir
from ..defaults import LOOPBACK
from ..errors import HarnessError
from ..scenario.fixtures import McpFixture
from ..wire.redaction import redact_text
from . import child_process
from .locks import PIP_INSTALL_OPTIONS, Lock, lock_texts, profile_locks
from .profile import Profile, ProfileError, render
from .readiness import poll_until_ready

if TYPE_CHECKING:
    from .tls_front import TlsFront

LOG_TAIL_LINES = 25
LOG_TAIL_BYTES = 64 * 1024
"""How much of the end of a log `log_tail` reads."""
INSTALL_TIMEOUT_S = 1800.0
HASH_MISMATCH = "DO NOT MATCH THE HASHES"
"""What pip says when a file differs from its hash in a requirements file."""


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The log's last lines, indented, with anything that looks like a secret redacted (a
    gateway may print its master key; errors carrying this tail reach reports)."""
    try:
        with path.open("rb") as log:  # the end alone: a gateway may write a log of any size
            log.seek(max(log.seek(0, os.SEEK_END) - LOG_TAIL_BYTES, 0))
            text = log.read().decode(errors="replace").rstrip().splitlines()
    except OSError:
        return "(no log)"
    return redact_text("\n".join(f"    | {line}" for line in text[-lines:])) or "    | (the log is empty)"


def find_python(version: str) -> str:
    """An interpreter of `version` (major.minor): `PARITY_PYTHON<major>_<minor>`, this one, one
    named `python<version>` on PATH, or one installed by pyenv."""
    override = os.environ.get(f"PARITY_PYTHON{version.replace('.', '_')}")
    candidates = [override] if override else []
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        candidates.append(sys.executable)
    if found := shutil.which(f"python{version}"):
        candidates.append(found)
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates += [str(p) for p in sorted(pyenv_root.glob(f"versions/{version}.*/bin/python{version}"), reverse=True)]
    for candidate in candidates:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            probe = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                   capture_output=True, text=True, timeout=30, check=False)
            if probe.returncode == 0 and probe.stdout.strip() == version:
                return candidate
    raise HarnessError(f"no Python {version} found (tried PARITY_PYTHON{version.replace('.', '_')}, this "
                       f"interpreter, python{version} on PATH and pyenv); install one or point "
                       f"PARITY_PYTHON{version.replace('.', '_')} at it")


@dataclass(frozen=True)
class Installation:
    """Where a profile's gateway lives: its cache folder, and its virtual environment if the
    profile installs one."""

    home: Path
    venv: Path | None = None
    python_version: str | None = None
    version: str | None = None
    """The gateway's release (the profile's `version`)."""

    def context(self) -> dict[str, Any]:
        """The template variables about the installation."""
        context: dict[str, Any] = {"home": str(self.home), "harness_python": sys.executable}
        if self.version is not None:
            context["version"] = self.version
        if self.venv is not None:
            context |= {"venv": str(self.venv), "bin": str(self.venv / "bin"),
                        "python": str(self.venv / "bin" / "python"), "python_version": self.python_version}
        return context


def installation_for(profile: Profile) -> Installation:
    if profile.install is None:
        return Installation(cache_dir() / "gateways" / profile.name, version=profile.version)
    key = hashlib.sha256(profile.install.model_dump_json().encode())
    for text in lock_texts(profile):
        key.update(hashlib.sha256(text).digest())
    digest = key.hexdigest()[:12]
    home = cache_dir() / "gateways" / f"{profile.name}-{digest}"
    return Installation(home, home / "venv", profile.install.python, profile.version)


def _run_logged(command: list[str], log: Path, cwd: Path, what: str) -> None:
    with log.open("a") as sink:
        sink.write(f"$ {' '.join(command)}\n")
        sink.flush()
        try:
            done = child_process.run(command, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise HarnessError(f"{what}: {error}\n{log_tail(log)}") from error
    if done.returncode != 0:
        raise HarnessError(f"{what} failed (exit {done.returncode}); the end of {log}:\n{log_tail(log)}")


def install(profile: Profile, report: Callable[[str], None] = print) -> Installation:
    """Make the profile's environment unless a complete one is cached; `report` gets one line
    per phase (installs take minutes)."""
    installation = installation_for(profile)
    spec = profile.install
    if spec is None or installation.venv is None:
        installation.home.mkdir(parents=True, exist_ok=True)
        return installation
    try:
        locks = profile_locks(profile)
    except ProfileError as error:
        raise HarnessError(str(error)) from error
    done_marker = installation.home / "installed.json"
    if done_marker.exists():
        return installation
    if installation.home.exists():
        shutil.rmtree(installation.home)  # a half-made environment from an interrupted install
    installation.home.mkdir(parents=True)
    log = installation.home / "install.log"
    where = f"installing {profile.name}"
    python = find_python(spec.python)
    report(f"installing {profile.name} into {installation.venv} from its lock (once; this takes a few minutes) ...")
    _run_logged([python, "-m", "venv", str(installation.venv)], log, installation.home, where)
    pip = [str(installation.venv / "bin" / "python"), "-m", "pip"]
    for lock, command in ((locks.packages, ["install"]),
                          (locks.downloads, ["download", "-d", str(installation.home / "downloads")])):
        if lock is not None:
            _install_locked(lock, [*pip, *command, "--disable-pip-version-check", "-q", *PIP_INSTALL_OPTIONS],
                            installation.home, log, where)
    for index, step in enumerate(spec.steps):
        try:
            command = [render(part, installation.context(), f"install.steps[{index}]") for part in step]
        except ProfileError as error:
            raise HarnessError(f"the profile {profile.name} is broken: {error}") from error
        _run_logged(command, log, installation.home, f"{where}: install.steps[{index}]")
    done_marker.write_text(spec.model_dump_json(indent=2))
    return installation


def _install_locked(lock: Lock, pip: list[str], home: Path, log: Path, where: str) -> None:
    """`pip ... -r <lock>` on a copy of the lock kept in `home` (what was installed from); a
    file whose hash differs from the lock's is named in the error."""
    copy = home / lock.path.name
    copy.write_text(lock.text, encoding="utf-8")
    try:
        _run_logged([*pip, "-r", str(copy)], log, home, where)
    except HarnessError as error:
        text = log.read_text(errors="replace")
        if HASH_MISMATCH not in text:
            raise
        named = re.findall(r"^\s+(\S+==\S+) from ", text.split(HASH_MISMATCH, 1)[1], re.MULTILINE)
        raise HarnessError(f"{where} refused: the file fetched for {', '.join(named) or 'a package'} does not "
                           f"match its hash in {lock.path} (tampered with, or a wrong lock); nothing from the lock "
                           f"was installed. The end of {log}:\n{log_tail(log)}") from error


class _FreePorts(dict[str, int]):
    """`ports.<name>`: a free loopback port per name, chosen on first use."""

    def __missing__(self, name: str) -> int:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((LOOPBACK, 0))
            port = probe.getsockname()[1]
        self[name] = port
        return port


@dataclass
class RunningGateway:
    """A started gateway: where to reach it, how to talk to it, and its log."""

    profile: Profile
    base_url: str
    model: str
    headers: dict[str, str] = field(repr=False)
    log: Path
    process: child_process.ChildProcess = field(repr=False)
    tls_front: TlsFront | None = field(default=None, repr=False)

    def stop(self) -> None:
        """SIGTERM to the gateway's own process group, SIGKILL after the grace period; then its
        TLS front, if it has one."""
        self.process.stop()
        if self.tls_front is not None:
            self.tls_front.stop()


def start(profile: Profile, installation: Installation, *, upstream: str, mcp: Mapping[str, McpFixture],
          model: str) -> RunningGateway:
    """Start the gateway pointed at `upstream` (through a TLS front when its profile asks) and
    the MCP fixtures and wait until it is ready; a gateway that exits or stays unready is stopped
    and reported with its log's tail."""
    run_dir = _fresh_run_dir(installation.home)
    front: TlsFront | None = None
    if profile.start.upstream_tls:
        from .tls_front import start_tls_front  # it imports cryptography: only for a profile that asks for TLS
        front = start_tls_front(upstream, run_dir)
    context = installation.context() | {
        "run_dir": str(run_dir), "upstream": (front.url if front else upstream).rstrip("/"), "ports": _FreePorts(),
        "secret": f"sk-parity-{secrets.token_hex(12)}", "model": model,
        "mcp": {name: {"base_url": fixture.base_url} for name, fixture in mcp.items()},
    } | ({"upstream_ca": str(front.ca_file)} if front else {})
    try:
        gateway, ready = _launch(profile, context, run_dir, front)
    except BaseException:
        if front:
            front.stop()
        raise
    try:
        _wait_ready(gateway, *ready)
        _wait_serving(gateway)
    except BaseException:
        gateway.stop()
        raise
    return gateway


def _fresh_run_dir(home: Path) -> Path:
    """A folder of its own for one start of the gateway (its rendered files, its stores, its
    log, which stays to be read after the run): `home/runs/PID-...`, so two runs of one profile
    at once, in two processes or in one, never write each other's settings. The folders of
    processes that have ended are removed first: a run's folders stay until the next start."""
    runs = home / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    for folder in runs.iterdir():
        owner, _, _ = folder.name.partition("-")
        if not (owner.isdigit() and psutil.pid_exists(int(owner))):
            shutil.rmtree(folder, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=runs))


def _launch(profile: Profile, context: dict[str, Any], run_dir: Path,
            front: TlsFront | None) -> tuple[RunningGateway, tuple[str, str, Any, dict[str, str]]]:
    """The gateway's process started from its rendered templates, and the request that tells it
    is ready (method, path, body, headers)."""
    name = profile.name
    try:
        for file_name, template in profile.start.files.items():
            (run_dir / file_name).write_text(render(template, context, f"{name}: start.files[{file_name}]"))
        command = [render(part, context, f"{name}: start.command") for part in profile.start.command]
        env = os.environ | {key: render(value, context, f"{name}: start.env.{key}")
                            for key, value in profile.start.env.items()}
        base_url = render(profile.target.base_url, context, f"{name}: target.base_url")
        target_model = render(profile.target.model, context, f"{name}: target.model")
        headers = {key: render(value, context, f"{name}: target.headers.{key}")
                   for key, value in profile.target.headers.items()}
        ready = profile.start.ready
        ready_body = json.loads(render(json.dumps(ready.body), context, f"{name}: start.ready.body"))
        ready_headers = {key: render(value, context, f"{name}: start.ready.headers.{key}")
                         for key, value in ready.headers.items()}
    except ProfileError as error:
        raise HarnessError(f"the profile {name} is broken: {error}") from error
    log = run_dir / "gateway.log"
    with log.open("wb") as sink:
        try:
            process = child_process.ChildProcess(command, cwd=run_dir, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL, grace_s=profile.start.stop_grace_s)
        except OSError as error:
            raise HarnessError(f"{name} cannot be started ({command[0]}): {error}") from error
    gateway = RunningGateway(profile, base_url, target_model, headers, log, process, front)
    return gateway, (ready.method, ready.path, ready_body, ready_headers)


def _still_running(gateway: RunningGateway) -> Callable[[], None]:
    def check() -> None:
        if (code := gateway.process.poll()) is not None:
            raise HarnessError(f"{gateway.profile.name} exited (code {code}) before it was ready; the end of "
                               f"{gateway.log}:\n{log_tail(gateway.log)}")
    return check


def _wait_ready(gateway: RunningGateway, method: str, path: str, body: Any, headers: dict[str, str]) -> None:
    ready = gateway.profile.start.ready
    url = gateway.base_url.rstrip("/") + path
    last = poll_until_ready(method, url, timeout_s=ready.timeout_s, ready=lambda status: status in ready.status,
                            body=body, headers=headers, check=_still_running(gateway))
    if last is not None:
        raise HarnessError(f"{gateway.profile.name} was not ready within {ready.timeout_s:g}s ({method} {url}: "
                           f"{last}); the end of {gateway.log}:\n{log_tail(gateway.log)}")


NEVER_MADE = "resp_parity_readiness"
"""A response id no gateway made: retrieving it touches the stored responses and answers 4xx."""


def _wait_serving(gateway: RunningGateway) -> None:
    """Wait until the gateway serves its Responses API, not only its readiness check: a retrieve
    of a response it never made answers below 500. A health endpoint can answer before the
    stores behind the API exist (llama-stack 0.7.3 creates its SQLite tables on the first use of
    its store, and two first uses at once race, as a background request's are: `_ensure_engine`
    sets the engine before its `create_all` ends, sqlalchemy_sqlstore.py:93-101, so the second
    finds no `responses` table); one request, alone, before any scenario, makes them. A gateway that never serves
    is a start-up failure, reported as such."""
    timeout_s = gateway.profile.start.ready.timeout_s
    url = f"{gateway.base_url.rstrip('/')}{gateway.profile.target.responses_path}/{NEVER_MADE}"
    last = poll_until_ready("GET", url, timeout_s=timeout_s, headers=gateway.headers,
                            check=_still_running(gateway))
    if last is not None:
        raise HarnessError(f"{gateway.profile.name} answered its readiness check but not its Responses API within "
                           f"{timeout_s:g}s (GET {url}: {last}); the end of {gateway.log}:\n{log_tail(gateway.log)}")

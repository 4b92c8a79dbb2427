"""Locks: what a target profile installs, pinned to the last file. A profile's `install.packages`
and `install.downloads` say what it asks for; its lock files say exactly what is installed (or
fetched), every package at one version with the sha256 of each of its files, resolved once by
`parity profiles lock` and reviewed like code. A new gateway version is a new lock in a pull
request, never a fresh resolution on the machine that runs it.

The locks of `<folder>/<name>.yaml` at version V are `<folder>/locks/<name>-V.txt` (what
pip installs) and `<folder>/locks/<name>-V.downloads.txt` (files the install steps use, fetched
without their dependencies). They are installed with `pip install --require-hashes --no-deps
--only-binary :all:`: nothing outside the lock is installed, and no package's build code runs
(an sdist would be built in an isolated environment whose build tools are not hash-checked).

A lock is read as the strict subset of pip's requirements format that `uv pip compile
--generate-hashes` writes: one `name==version` per requirement with its `--hash=sha256:...`
options, comments, nothing else. pip's full format (other options, `-r`, URLs, environment
variables) is refused rather than parsed, so what this module checks is what pip installs; a
general parser (pip's own is no public API) would accept what a lock must not say.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .profile import SHIPPED_PROFILES_DIR, Profile, ProfileError

LOCKS_FOLDER = "locks"
LOCK_PLATFORM = "x86_64-unknown-linux-gnu"
"""Locks are resolved for Linux x86_64, the machines CI and the peer tier run on."""
MAX_LOCK_BYTES = 4 * 2**20
"""The largest shipped lock is about 300 KB (a few hundred files' hashes)."""
RESOLVE_TIMEOUT_S = 600.0
PIP_INSTALL_OPTIONS = ("--require-hashes", "--no-deps", "--only-binary", ":all:")
"""How a lock is installed (`pip install ... -r <lock>`) or fetched (`pip download`)."""

_PYTHON_LINE = re.compile(r"^# Resolved for Python (?P<python>3\.\d+) on (?P<platform>\S+)", re.MULTILINE)
_COMMENT = re.compile(r"(^|\s+)#.*$")  # pip's own rule: `#` at the start or after whitespace
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==(?P<version>[A-Za-z0-9.+!_-]+)$")
_HASH = re.compile(r"^--hash=sha256:(?P<digest>[0-9a-f]{64})$")


class LockError(ProfileError):
    """A lock that is missing, unreadable, or does not match its profile; the message names the
    file and says how to make it again."""


@dataclass(frozen=True)
class Pin:
    """One locked package: its canonical name, version, and the sha256 of each file it may be
    installed from."""

    name: str
    version: Version
    hashes: tuple[str, ...]


@dataclass(frozen=True)
class Lock:
    """A lock file as read: its text (what pip is given) and its pins by canonical name."""

    path: Path
    text: str
    python: str
    """The Python version (major.minor) it was resolved for, from its header."""
    pins: Mapping[str, Pin]

    def uncovered(self, requirements: Iterable[str]) -> list[str]:
        """The requirements no pin satisfies (by name and version range)."""
        missing = []
        for text in requirements:
            requirement = Requirement(text)
            pin = self.pins.get(canonicalize_name(requirement.name))
            if pin is None or not requirement.specifier.contains(pin.version, prereleases=True):
                missing.append(text)
        return missing


@dataclass(frozen=True)
class ProfileLocks:
    """A profile's checked locks: `packages` for pip to install, `downloads` for the steps to
    use; None where the profile asks for nothing of that kind."""

    packages: Lock | None
    downloads: Lock | None


def lock_paths(profile: Profile) -> tuple[Path, Path]:
    """Where the profile's locks are: (packages, downloads), in `locks/` beside its file."""
    if profile.source is None:
        raise LockError(f"the profile {profile.name} was not read from a file: its locks have no place")
    stem = f"{profile.name}-{profile.version}" if profile.version is not None else profile.name
    folder = profile.source.parent / LOCKS_FOLDER
    return folder / f"{stem}.txt", folder / f"{stem}.downloads.txt"


def lock_texts(profile: Profile) -> list[bytes]:
    """The contents of the profile's lock files that exist (what an installation is keyed by)."""
    if profile.source is None:
        return []
    return [path.read_bytes() for path in lock_paths(profile) if path.is_file()]


def lock_command(profile: Profile) -> str:
    """The command that writes the profile's locks."""
    assert profile.source is not None
    named = profile.name if profile.source.parent == SHIPPED_PROFILES_DIR else str(profile.source)
    return f"parity profiles lock {named}" + (f"@{profile.version}" if profile.version is not None else "")


def read_lock(path: Path) -> Lock:
    """The lock in `path`; `LockError` names the file and line of anything it may not say."""
    try:
        if path.stat().st_size > MAX_LOCK_BYTES:
            raise LockError(f"{path}: larger than {MAX_LOCK_BYTES} bytes; a lock is a list of hashes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise LockError(f"{path}: cannot be read ({error})") from error
    header = _PYTHON_LINE.search(text)
    if header is None:
        raise LockError(f"{path}: its header does not say which Python it was resolved for "
                        "(`# Resolved for Python 3.x on <platform>`)")
    return Lock(path, text, header["python"], _pins(text, str(path)))


def _pins(text: str, where: str) -> dict[str, Pin]:
    pins: dict[str, Pin] = {}
    for number, line in _logical_lines(text):
        pin = _pin(line, f"{where}:{number}")
        if pin is None:
            continue
        if pin.name in pins:
            raise LockError(f"{where}:{number}: {pin.name} is pinned twice")
        pins[pin.name] = pin
    return pins


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Lines as pip joins them (a trailing backslash continues a line unless the line is a
    comment), comments removed, each with the number of its first line."""
    pending: list[str] = []
    first = 0
    for number, line in enumerate(text.splitlines(), start=1):
        is_comment = _COMMENT.match(line) is not None
        if line.endswith("\\") and not is_comment:
            first = first if pending else number
            pending.append(line[:-1])
            continue
        if pending:
            yield first, _COMMENT.sub("", "".join([*pending, " " + line if is_comment else line]))
            pending = []
        else:
            yield number, _COMMENT.sub("", line)
    if pending:
        yield first, _COMMENT.sub("", "".join(pending))


def _pin(line: str, where: str) -> Pin | None:
    words = line.split()
    if not words:
        return None
    pinned = _PIN.match(words[0])
    if pinned is None:
        raise LockError(f"{where}: {words[0]!r} is not `name==version`; a lock holds pinned packages and their "
                        "hashes only")
    try:
        version = Version(pinned["version"])
    except InvalidVersion as error:
        raise LockError(f"{where}: {error}") from error
    hashes = []
    for word in words[1:]:
        hashed = _HASH.match(word)
        if hashed is None:
            raise LockError(f"{where}: {word!r} is not `--hash=sha256:<64 hex digits>`; a lock holds pinned "
                            "packages and their hashes only")
        hashes.append(hashed["digest"])
    if not hashes:
        raise LockError(f"{where}: {words[0]} has no --hash")
    return Pin(canonicalize_name(pinned["name"]), version, tuple(hashes))


def profile_locks(profile: Profile) -> ProfileLocks:
    """The profile's locks, checked: each exists, was resolved for the profile's Python, and
    pins every requirement of `install.packages` (resp. `install.downloads`) at a version it
    allows. `LockError` says which lock and how to make it again."""
    spec = profile.install
    if spec is None or not (spec.packages or spec.downloads):
        return ProfileLocks(None, None)
    packages, downloads = lock_paths(profile)
    return ProfileLocks(_checked(profile, packages, spec.python, spec.packages, "install.packages"),
                        _checked(profile, downloads, spec.python, spec.downloads, "install.downloads"))


def _checked(profile: Profile, path: Path, python: str, requirements: list[str], field: str) -> Lock | None:
    if not requirements:
        return None
    version = f" {profile.version}" if profile.version is not None else ""
    how = f"make it with `{lock_command(profile)}`, review it, and commit it beside the profile"
    if not path.is_file():
        raise LockError(f"{profile.name}{version} has no lock ({path}): a profile installs only what a reviewed "
                        f"lock pins, with hashes; {how}")
    lock = read_lock(path)
    if lock.python != python:
        raise LockError(f"{path}: resolved for Python {lock.python}, but {profile.name} installs with Python "
                        f"{python}; {how}")
    try:
        missing = lock.uncovered(requirements)
    except InvalidRequirement as error:
        raise LockError(f"{profile.source}: {field}: {error}") from error
    if missing:
        raise LockError(f"{path}: pins nothing that satisfies {', '.join(missing)} ({field}); {how}")
    return lock


def find_uv() -> str:
    """The `uv` executable: the one the `uv` package installed beside this tool, else one on PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        pass
    if found := shutil.which("uv"):
        return found
    raise LockError("writing a lock needs uv: pip install 'responses-parity[lock]' (or put uv on PATH)")


def write_locks(profile: Profile) -> list[Path]:
    """Resolve the profile's `install.packages` (with their dependencies) and
    `install.downloads` (without) for its Python on Linux x86_64, wheels only, with the hashes
    of every file, and write its locks; a lock of a kind the profile no longer asks for is
    removed. The index is uv's (PyPI, or `UV_INDEX_URL` and the other `UV_*` settings)."""
    spec = profile.install
    if spec is None or not (spec.packages or spec.downloads):
        raise LockError(f"{profile.name} installs nothing from the package index: there is nothing to lock")
    uv = find_uv()
    written = []
    for path, requirements, kind in zip(lock_paths(profile), (spec.packages, spec.downloads),
                                        ("packages", "downloads"), strict=True):
        if not requirements:
            path.unlink(missing_ok=True)
            continue
        text = _header(profile, kind) + _resolve(uv, spec.python, requirements, kind)
        _pins(text, f"uv's lock for {path.name}")  # checked before it replaces the reviewed file
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as error:
            raise LockError(f"{path}: cannot be written ({error})") from error
        written.append(path)
    return written


def _header(profile: Profile, kind: str) -> str:
    assert profile.install is not None and profile.source is not None
    version = f" {profile.version}" if profile.version is not None else ""
    what = ("every package it installs" if kind == "packages"
            else "the files its install steps use, fetched without their dependencies and not installed")
    verb = "install" if kind == "packages" else "download -d <home>/downloads"
    return (f"# The lock of the target profile {profile.name}{version} ({profile.source.name}): {what},\n"
            f"# each at one version with the sha256 of every file it may come from.\n"
            f"# Resolved for Python {profile.install.python} on {LOCK_PLATFORM} (Linux x86_64), wheels only, by:\n"
            f"#    {lock_command(profile)}\n"
            f"# Used as: pip {verb} {' '.join(PIP_INSTALL_OPTIONS)} -r <this file>\n"
            f"# What changes here changes what runs on the machine: review it like code.\n")


def _resolve(uv: str, python: str, requirements: list[str], kind: str) -> str:
    with tempfile.TemporaryDirectory() as scratch:
        wanted = Path(scratch) / f"install.{kind}"  # uv's `# via -r install.packages` notes name the field
        wanted.write_text("".join(f"{requirement}\n" for requirement in requirements), encoding="utf-8")
        command = [uv, "pip", "compile", "--quiet", "--no-header", "--generate-hashes", "--only-binary", ":all:",
                   "--python", sys.executable, "--python-version", python, "--python-platform", LOCK_PLATFORM,
                   wanted.name]
        try:
            done = subprocess.run(command, cwd=scratch, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S,
                                  env=os.environ | {"UV_PYTHON_DOWNLOADS": "never"}, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise LockError(f"uv pip compile: {error}") from error
    if done.returncode != 0:
        raise LockError(f"uv could not resolve {', '.join(requirements)} for Python {python} on {LOCK_PLATFORM} "
                        f"(exit {done.returncode}):\n{done.stderr.strip()}")
    if kind == "packages":
        return done.stdout
    # Downloads are fetched without their dependencies, but resolved with them and the rest left
    # out: with `--no-deps`, uv 0.13 writes no hashes for the wheels of a `--find-links` folder.
    named = {canonicalize_name(Requirement(requirement).name) for requirement in requirements}
    return "".join(_pin_text(pin) for pin in _pins(done.stdout, "uv's resolution").values() if pin.name in named)


def _pin_text(pin: Pin) -> str:
    lines = [f"{pin.name}=={pin.version}", *(f"--hash=sha256:{digest}" for digest in pin.hashes)]
    return " \\\n    ".join(lines) + "\n"

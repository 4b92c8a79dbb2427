"""Profiles install exactly what their reviewed locks pin: every shipped profile version has a
lock that covers what it asks for; a version without one, a lock in another format, or a file
whose hash differs from the lock's is refused; and `parity profiles lock` writes a lock that
installs. Installs here are real (`python -m venv`, pip, uv) from wheels built in the test and
served from a local folder: nothing reaches a package index."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from responses_parity.harness.cli import main
from responses_parity.harness.engine.gateway_process import install, installation_for
from responses_parity.harness.engine.locks import LockError, lock_paths, profile_locks, read_lock
from responses_parity.harness.engine.profile import SHIPPED_PROFILES_DIR, find_profile, load_profile, profile_paths
from responses_parity.harness.errors import HarnessError

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
PROFILE = f"""
name: tinygw
version: "1.0"
title: tiny gateway {{{{ version }}}}
install:
  python: "{PYTHON}"
  packages: ["tinygw=={{{{ version }}}}"]
  downloads: ["tinydata==2.0"]
  steps:
    - ["{{{{ python }}}}", "-c", "import glob, sys; assert glob.glob(sys.argv[1] + '/tinydata-2.0-*.whl')",
       "{{{{ home }}}}/downloads"]
start: {{command: ["{{{{ bin }}}}/python", "-m", "tinygw"], ready: {{path: /health}}}}
"""


def make_wheel(folder: Path, name: str, version: str) -> Path:
    """A pure-Python wheel of one module, written by hand (PEP 427: a zip with METADATA, WHEEL
    and a RECORD of every file's hash): building one with a build backend would need the index."""
    dist_info = f"{name}-{version}.dist-info"
    files = {f"{name}.py": f"VERSION = {version!r}\n".encode(),
             f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: responses-parity tests\nRoot-Is-Purelib: true\n"
                                   b"Tag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for path, data in files.items()) + f"{dist_info}/RECORD,,\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name_in_zip, data in files.items():
            wheel.writestr(name_in_zip, data)
        wheel.writestr(f"{dist_info}/RECORD", record)
    return path


def lock_text(python: str, *pins: tuple[str, str]) -> str:
    """A lock as `parity profiles lock` writes one: a header naming the Python, then each
    `name==version` with its hash."""
    body = "".join(f"{requirement} \\\n    --hash=sha256:{digest}\n    # via -r install.packages\n"
                   for requirement, digest in pins)
    return f"# test lock\n# Resolved for Python {python} on x86_64-unknown-linux-gnu (Linux x86_64), by hand\n{body}"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def _no_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip and uv reach no package index, and installs go to a cache of the test's own."""
    for tool in ("PIP", "UV"):
        monkeypatch.setenv(f"{tool}_NO_INDEX", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("PARITY_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def local_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of wheels that pip and uv find packages in."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "tinygw", "1.0")
    make_wheel(wheels, "tinydata", "2.0")
    for tool in ("PIP", "UV"):
        monkeypatch.setenv(f"{tool}_FIND_LINKS", str(wheels))
    return wheels


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "profiles" / "tinygw.yaml"
    path.parent.mkdir()
    path.write_text(PROFILE)
    return path


def _write_locks(profile_file: Path, wheels: Path, *, tinygw: str | None = None, tinydata: str | None = None) -> None:
    packages, downloads = lock_paths(load_profile(profile_file))
    packages.parent.mkdir(exist_ok=True)
    packages.write_text(lock_text(PYTHON, ("tinygw==1.0", tinygw or sha256(wheels / "tinygw-1.0-py3-none-any.whl"))))
    downloads.write_text(lock_text(PYTHON, ("tinydata==2.0",
                                            tinydata or sha256(wheels / "tinydata-2.0-py3-none-any.whl"))))


def _imports(venv: Path, module: str) -> bool:
    return subprocess.run([str(venv / "bin" / "python"), "-c", f"import {module}"], capture_output=True,
                          check=False).returncode == 0


# --- the shipped profiles ---------------------------------------------------------------------

def _shipped_lock_targets() -> dict[Path, str]:
    """Each shipped lock file -> the profile version it was written for, as its header names it."""
    targets = {}
    for path in sorted((SHIPPED_PROFILES_DIR / "locks").glob("*.txt")):
        command = re.search(r"^#    parity profiles lock (\S+)$", path.read_text(), re.MULTILINE)
        assert command is not None, f"{path}: its header does not name the command that wrote it"
        targets[path] = command[1]
    return targets


def test_every_shipped_profile_version_has_a_lock_that_covers_what_it_installs() -> None:
    """Each shipped profile at its own version, and every version a lock is shipped for (smg
    1.12.0 for the upgrade example), pins every package its install names, for its Python."""
    targets = _shipped_lock_targets()
    for name in profile_paths():
        profile = find_profile(name)
        assert profile is not None and f"{name}@{profile.version}" in targets.values(), f"{name} has no lock"
    for path, target in targets.items():
        profile = find_profile(target)
        assert profile is not None and profile.install is not None and path in lock_paths(profile)
        locks = profile_locks(profile)  # present, resolved for its Python, satisfies every requirement
        assert locks.packages is not None
        for requirement in map(Requirement, profile.install.packages):
            assert canonicalize_name(requirement.name) in locks.packages.pins, (target, requirement)
        assert all(pin.hashes for pin in locks.packages.pins.values())
        assert (locks.downloads is not None) == bool(profile.install.downloads)


def test_the_llama_stack_profile_fetches_its_litellm_wheel_by_hash_and_does_not_install_it() -> None:
    profile = find_profile("llama-stack")
    assert profile is not None and profile.install is not None
    locks = profile_locks(profile)
    assert locks.downloads is not None and set(locks.downloads.pins) == {"litellm"}
    assert locks.packages is not None and "litellm" not in locks.packages.pins
    assert not any("pip" in part for step in profile.install.steps for part in step)


def test_a_profile_version_without_a_lock_refuses_to_install_and_says_how_to_make_it(
        tmp_path: Path, profile_file: Path) -> None:
    newer = find_profile("smg@1.14.0")
    assert newer is not None
    with pytest.raises(HarnessError) as caught:
        install(newer)
    message = str(caught.value)
    assert "smg 1.14.0 has no lock" in message and "`parity profiles lock smg@1.14.0`" in message
    assert str(SHIPPED_PROFILES_DIR / "locks" / "smg-1.14.0.txt") in message
    assert not (tmp_path / "cache").exists()  # refused before anything was made or fetched
    with pytest.raises(HarnessError, match=rf"`parity profiles lock {profile_file}@1.0`"):
        install(load_profile(profile_file))


# --- what a lock may say ----------------------------------------------------------------------

DIGEST = "a" * 64


@pytest.mark.parametrize(("line", "complaint"), [
    (f"--index-url https://mirror.example/simple\ntinygw==1.0 --hash=sha256:{DIGEST}", "'--index-url' is not"),
    (f"-r other.txt\ntinygw==1.0 --hash=sha256:{DIGEST}", "'-r' is not"),
    (f"tinygw==1.0 --hash=sha256:{DIGEST} --extra-index-url=https://x.example", "'--extra-index-url=https"),
    ("tinygw==1.0", "tinygw==1.0 has no --hash"),
    (f"tinygw>=1.0 --hash=sha256:{DIGEST}", "'tinygw>=1.0' is not `name==version`"),
    (f"tinygw==${{VERSION}} --hash=sha256:{DIGEST}", "is not `name==version`"),
    ("tinygw==1.0 --hash=md5:0123456789abcdef0123456789abcdef", "is not `--hash=sha256"),
    (f"tinygw @ https://x.example/tinygw.whl --hash=sha256:{DIGEST}", "'tinygw' is not `name==version`"),
    (f"tinygw==1.0 --hash=sha256:{DIGEST}\nTinyGW==1.0 --hash=sha256:{DIGEST}", "tinygw is pinned twice"),
])
def test_a_lock_holds_pinned_hashed_packages_and_nothing_else(tmp_path: Path, line: str, complaint: str) -> None:
    path = tmp_path / "mine-1.0.txt"
    path.write_text(f"# Resolved for Python {PYTHON} on x86_64-unknown-linux-gnu\n# a comment\n\n{line}\n")
    with pytest.raises(LockError) as caught:
        read_lock(path)
    assert str(caught.value).startswith(f"{path}:") and complaint in str(caught.value)


def test_a_lock_is_read_as_pip_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "mine-1.0.txt"
    path.write_text(f"# Resolved for Python {PYTHON} on x86_64-unknown-linux-gnu\n"
                    f"Tiny_GW==1.0 \\\n    --hash=sha256:{DIGEST} \\\n    --hash=sha256:{'b' * 64}\n"
                    f"    # via -r install.packages\n"
                    f"other==2.0rc1 --hash=sha256:{DIGEST}  # a trailing comment\n")
    lock = read_lock(path)
    assert lock.python == PYTHON
    assert {name: (str(pin.version), pin.hashes) for name, pin in lock.pins.items()} == {
        "tiny-gw": ("1.0", (DIGEST, "b" * 64)), "other": ("2.0rc1", (DIGEST,))}
    assert lock.uncovered(["tiny-gw==1.0", "Other>=2.0rc1", "tiny_gw[proxy]==1.0", "tiny-gw==1.1", "third"]) == [
        "tiny-gw==1.1", "third"]


def test_a_lock_that_does_not_match_its_profile_is_refused(tmp_path: Path, profile_file: Path) -> None:
    packages, downloads = lock_paths(load_profile(profile_file))
    packages.parent.mkdir()
    downloads.write_text(lock_text(PYTHON, ("tinydata==2.0", DIGEST)))
    packages.write_text(lock_text(PYTHON, ("tinygw==0.9", DIGEST)))
    with pytest.raises(HarnessError, match=r"tinygw-1.0.txt: pins nothing that satisfies tinygw==1.0 "
                                           r"\(install.packages\); make it with `parity profiles lock"):
        install(load_profile(profile_file))
    packages.write_text(lock_text("3.99", ("tinygw==1.0", DIGEST)))
    with pytest.raises(HarnessError, match=rf"resolved for Python 3.99, but tinygw installs with Python {PYTHON}"):
        install(load_profile(profile_file))
    assert not (tmp_path / "cache").exists()


def test_a_changed_lock_installs_anew(profile_file: Path, local_index: Path) -> None:
    _write_locks(profile_file, local_index)
    first = installation_for(load_profile(profile_file))
    _write_locks(profile_file, local_index, tinygw=DIGEST)
    assert installation_for(load_profile(profile_file)).home != first.home


# --- installs from a local folder of wheels ---------------------------------------------------

@pytest.mark.parametrize("tampered", ["tinygw", "tinydata"])
def test_a_file_whose_hash_differs_from_the_lock_is_refused_naming_the_package(
        profile_file: Path, local_index: Path, tampered: str) -> None:
    _write_locks(profile_file, local_index, **{tampered: DIGEST})
    profile = load_profile(profile_file)
    with pytest.raises(HarnessError) as caught:
        install(profile, report=lambda line: None)
    message = str(caught.value)
    version = "1.0" if tampered == "tinygw" else "2.0"
    lock = lock_paths(profile)[0 if tampered == "tinygw" else 1]
    assert f"installing tinygw refused: the file fetched for {tampered}=={version} does not match its hash in " \
           f"{lock}" in message
    assert f"Expected sha256 {DIGEST}" in message  # pip's own account, in the log's tail
    installation = installation_for(profile)
    assert installation.venv is not None and not (installation.home / "installed.json").exists()
    assert _imports(installation.venv, "tinygw") is (tampered != "tinygw")
    assert not list((installation.home / "downloads").glob("*.whl"))


def test_parity_profiles_lock_writes_a_lock_that_installs(profile_file: Path, local_index: Path) -> None:
    result = CliRunner().invoke(main, ["profiles", "lock", f"{profile_file}@1.0"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    profile = load_profile(profile_file)
    packages, downloads = lock_paths(profile)
    assert f"wrote {packages} (1 package)" in result.output and f"wrote {downloads} (1 package)" in result.output
    header = packages.read_text().split("tinygw==", 1)[0]
    assert f"Python {PYTHON} on x86_64-unknown-linux-gnu" in header
    assert f"parity profiles lock {profile_file}@1.0" in header
    assert read_lock(packages).pins["tinygw"].hashes == (sha256(local_index / "tinygw-1.0-py3-none-any.whl"),)
    assert read_lock(downloads).pins["tinydata"].hashes == (sha256(local_index / "tinydata-2.0-py3-none-any.whl"),)

    installation = install(profile, report=lambda line: None)  # its step asserts the download is there
    assert installation.venv is not None and _imports(installation.venv, "tinygw")
    assert not _imports(installation.venv, "tinydata")  # fetched for the steps, not installed
    assert (installation.home / packages.name).read_text() == packages.read_text()  # what it was installed from

    listed = CliRunner().invoke(main, ["profiles", "--profile-dir", str(profile_file.parent)])
    assert f"lock: {packages}" in listed.output


def test_parity_profiles_lock_names_what_it_cannot_lock(profile_file: Path, local_index: Path) -> None:
    result = CliRunner().invoke(main, ["profiles", "lock", "no-such-gateway"])
    assert result.exit_code == 2 and "no-such-gateway: no such profile" in result.output
    profile_file.write_text(PROFILE.replace("tinygw=={{ version }}", "tinygw==7.0"))
    result = CliRunner().invoke(main, ["profiles", "lock", str(profile_file)])
    assert result.exit_code == 2 and "uv could not resolve tinygw==7.0" in result.output
    assert not lock_paths(load_profile(profile_file))[0].exists()

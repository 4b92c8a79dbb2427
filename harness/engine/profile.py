"""Target profiles: one YAML file per gateway saying how to install it, start it against the
scripted upstream and the MCP fixtures, know it is ready, talk to it, and what it lacks.

Every string in `install.steps`, `start` and `target` is a Jinja template, rendered in a sandbox
with bounds (`profile_templates`: `{{ }}`, `{% if %}` and one level of `{% for %}`, no `_`
attributes, bounded arithmetic and output). What it may use:
- `python`, `venv`, `bin`: the profile's own interpreter and virtual environment (`bin` is its
  scripts folder), unless it has no `install` section; `harness_python`: the interpreter running
  the harness; `home`: the profile's cache folder (kept between runs); `run_dir`: a fresh folder
  for this start (config files are written there, the gateway's log too);
- `upstream`: the scripted upstream's base URL (`{{ upstream }}/v1` is its OpenAI base URL);
- `mcp.<fixture>.base_url`: where each MCP fixture listens (`/mcp` there is its default run);
- `ports.<name>`: a free loopback port, the same for every use of one name (`ports.http` is the
  port the gateway must serve on); `secret`: a random token for this start (a master key);
- `model`: the model name scenarios use; `python_version`: `install.python`;
- `version`: the profile's `version`, which `title`, `install.packages` and `install.downloads`
  may use too.

What `install` names is resolved once, with the hash of every file, into the profile's locks
(`harness/engine/locks.py`: `locks/<name>-<version>.txt` beside the profile file, written by `parity
profiles lock`); an install takes exactly what they pin and refuses a profile version without
them.

Profiles are found by name among the shipped ones (`harness/gateways/`) and in folders the user
names; a path to a `.yaml` file is a profile too. `<profile>@<version>` (`smg@1.12.0`) is the
profile with its `version` replaced: the same gateway at another release, installed beside the
first. `ProfileError` names the file and the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import jinja2
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from ...openai_contract.documents import DocumentError, read_yaml
from ..defaults import DEFAULT_CHAT_PATH, DEFAULT_RESPONSES_PATH
from ..errors import did_you_mean
from ..scenario.capabilities import Capability
from .profile_templates import render_template
from .rewrites import Rewrites

SHIPPED_PROFILES_DIR = Path(__file__).resolve().parents[1] / "gateways"
_HOST_PORT = re.compile(r"(?:[\w.-]+|\[[\da-fA-F:.]+\]):\d{1,5}(?:/\S*)?")
"""`host:port`, a path after it or not: a gateway's base URL written without its scheme."""



class ProfileError(Exception):
    """A profile that cannot be found, read or understood; the message names the file."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InstallSpec(_Strict):
    python: str = Field(default="3.11", pattern=r"^3\.\d+$",
                        description="The interpreter its virtual environment is made with (major.minor).")
    packages: list[str] = Field(default_factory=list,
                                description="pip requirements (`name==1.2.3`): what its lock resolves and pins.")
    downloads: list[str] = Field(default_factory=list,
                                 description="Wheels the steps use, fetched by hash from its downloads lock into "
                                             "`{{ home }}/downloads`, without their dependencies; not installed.")
    steps: list[list[str]] = Field(default_factory=list,
                                   description="Commands (argument lists) run once after pip, in `home`; they "
                                               "fetch nothing (what they need is in `downloads`).")


class ReadySpec(_Strict):
    method: Literal["GET", "POST"] = "GET"
    path: str
    body: Any = None
    headers: dict[str, str] = Field(default_factory=dict)
    status: list[int] = Field(default_factory=lambda: [200], description="Answers that mean ready.")
    timeout_s: float = Field(default=120.0, gt=0)


class StartSpec(_Strict):
    command: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict, description="File name -> template, written to `run_dir`.")
    ready: ReadySpec
    stop_grace_s: float = Field(default=10.0, gt=0, description="How long SIGTERM is given before SIGKILL.")
    upstream_tls: bool = Field(default=False, description=(
        "Reach the scripted upstream over TLS: `{{ upstream }}` is then an https URL of a loopback TLS front "
        "for it, whose certificate (its own authority, made per start) is `{{ upstream_ca }}`."))


class TargetSpec(_Strict):
    base_url: str = "http://127.0.0.1:{{ ports.http }}"
    responses_path: str = DEFAULT_RESPONSES_PATH
    chat_path: str = DEFAULT_CHAT_PATH
    model: str = Field(default="{{ model }}", description="The model name as the gateway knows the scripted one.")
    headers: dict[str, str] = Field(default_factory=dict, description="Sent with every request; never reported.")


class Profile(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    version: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9.+!*-]*$",
                                description="The gateway's release, `{{ version }}` in the title, packages and "
                                            "templates; `<name>@<version>` replaces it.")
    title: str
    homepage: str | None = None
    install: InstallSpec | None = Field(default=None, description="None: nothing to install (the command is on "
                                                                  "the machine already).")
    start: StartSpec
    target: TargetSpec = Field(default_factory=TargetSpec)
    lacks: dict[Capability, str] = Field(default_factory=dict,
                                         description="Capability -> why the gateway lacks it (with a source).")
    rewrite: Rewrites = Field(default_factory=Rewrites)
    notes: list[str] = Field(default_factory=list, description="Workarounds the profile applies, and why.")
    _source: Path | None = PrivateAttr(default=None)

    @property
    def source(self) -> Path | None:
        """The file it was read from (its locks are in `locks/` beside it)."""
        return self._source

    def identity(self) -> dict[str, Any]:
        """What a run or golden set names the gateway by: profile, title, version, and the
        packages it installs (pinned)."""
        return {"profile": self.name, "title": self.title, "version": self.version,
                "packages": list(self.install.packages) if self.install else []}


def render(template: str, context: Mapping[str, Any], where: str) -> str:
    """Render one profile template; `ProfileError` names the field on an unknown variable, or
    on anything the template may not do."""
    try:
        return render_template(template, context)
    except (jinja2.TemplateError, ArithmeticError, TypeError, ValueError, RecursionError) as error:
        raise ProfileError(f"{where}: {error}") from error


def load_profile(path: Path, version: str | None = None) -> Profile:
    """The profile in `path`, at `version` if one is given, with `{{ version }}` filled in in
    its title and install.packages."""
    try:
        data = read_yaml(path)
    except (OSError, DocumentError) as error:
        raise ProfileError(f"{path}: cannot read it as YAML ({error})") from error
    if version is not None:
        if not isinstance(data, dict) or "version" not in data:
            raise ProfileError(f"{path}: has no `version` to replace with {version!r} (add `version:` and use "
                               "`{{ version }}` in install.packages)")
        data["version"] = version
    try:
        profile = Profile.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in error.errors())
        raise ProfileError(f"{path}: {problems}") from error
    profile = _with_version(profile, path)
    profile._source = path
    return profile


def _with_version(profile: Profile, path: Path) -> Profile:
    """`{{ version }}` filled in in the title, install.packages and install.downloads (other
    templates get it at start)."""
    context = {"version": profile.version} if profile.version is not None else {}
    title = render(profile.title, context, f"{path}: title")
    if profile.install is None:
        return profile.model_copy(update={"title": title})
    rendered = {field: [render(requirement, context, f"{path}: install.{field}[{index}]")
                        for index, requirement in enumerate(getattr(profile.install, field))]
                for field in ("packages", "downloads")}
    return profile.model_copy(update={"title": title, "install": profile.install.model_copy(update=rendered)})


def profile_paths(dirs: Iterable[Path] = ()) -> dict[str, Path]:
    """Profile name (file stem) -> file, the user's folders winning over the shipped one."""
    found: dict[str, Path] = {}
    for folder in [SHIPPED_PROFILES_DIR, *dirs]:
        for path in sorted(folder.glob("*.yaml")):
            found[path.stem] = path
    return found


def find_profile(target: str, dirs: Iterable[Path] = ()) -> Profile | None:
    """The profile `target` names (a profile name, or a path to a profile file, either with
    `@<version>` after it), or None when `target` is no profile (a URL, `reference`, `openai`)."""
    if "://" in target:
        return None
    named, at, version = target.rpartition("@")
    if not at:
        named, version = target, None
    elif not version:
        raise ProfileError(f"{target}: write <profile>@<version>, e.g. smg@1.12.0")
    if named.endswith((".yaml", ".yml")):
        path = Path(named)
        if not path.is_file():
            raise ProfileError(f"{named}: no such profile file")
        return load_profile(path, version)
    path = profile_paths(dirs).get(named)
    if path is None:
        if version is not None:
            raise no_such_profile(named, dirs)
        return None
    profile = load_profile(path, version)
    if profile.name != path.stem:
        raise ProfileError(f"{path}: name {profile.name!r} differs from the file's name {path.stem!r}")
    return profile


def no_such_profile(name: str, dirs: Iterable[Path] = ()) -> ProfileError:
    """The error for `name`, which names no profile: the closest profile name, and all of them."""
    known = sorted(profile_paths(dirs))
    return ProfileError(f"{name}: no such profile{did_you_mean(name, known)}; the profiles: {', '.join(known)}")


def unknown_target(target: str, built_in: Sequence[str], dirs: Iterable[Path] = ()) -> str:
    """Why `target`, neither a URL nor one of `built_in` nor a profile, names no target: a bare
    `host:port` is shown as the URL it may mean, another name with the closest target name."""
    if _HOST_PORT.fullmatch(target):
        return f"unknown target {target!r} (did you mean 'http://{target}'?): a base URL starts with its scheme"
    profiles = sorted(profile_paths(dirs))
    return (f"unknown target {target!r}{did_you_mean(target, [*built_in, *profiles])}: give {', '.join(built_in)}, "
            f"a profile ({', '.join(profiles)}), a profile file, or a gateway's base URL (http://...)")

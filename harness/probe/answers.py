"""A target's probe answers kept in a folder (`parity probe --record DIR`), so a run against
OpenAI can be compared with later (`--against DIR`) without OpenAI."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ...openai_contract.documents import read_json
from ..errors import HarnessError
from ..wire.redaction import Redactor
from .send import Outcome

ANSWERS_FILE = "probe-answers.json"
FORMAT = 1


@dataclass(frozen=True)
class Recorded:
    """The outcomes one target gave, by probe id."""

    target: str
    recorded_at: str
    outcomes: dict[str, Outcome]


def write_answers(folder: Path, target: str, outcomes: dict[str, Outcome], redactor: Redactor) -> Path:
    """Add `outcomes` to the folder's answers (a probe answered again replaces its answer);
    secrets removed. `HarnessError` when the folder holds another target's answers."""
    path = folder / ANSWERS_FILE
    previous = read_answers(folder) if path.exists() else None
    if previous is not None and previous.target != target:
        raise HarnessError(f"{path} holds the answers of {previous.target}, not of {target}: record into another "
                           "folder")
    folder.mkdir(parents=True, exist_ok=True)
    merged = (previous.outcomes if previous else {}) | outcomes
    redactor.write_json(path, {"format": FORMAT, "target": target, "recorded_at": datetime.now(UTC).isoformat(),
                               "answers": {key: merged[key].to_dict() for key in sorted(merged)}})
    return path


def read_answers(folder: Path) -> Recorded:
    """The answers recorded in `folder`; `HarnessError` naming the file and what is wrong."""
    path = folder / ANSWERS_FILE
    try:
        data = read_json(path)
    except FileNotFoundError:
        raise HarnessError(f"{folder} holds no recorded probe answers ({ANSWERS_FILE}): write them with "
                           f"`parity probe --target ... --record {folder}`") from None
    except (OSError, ValueError) as error:
        raise HarnessError(f"{path} cannot be read: {error}") from error
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("answers"), dict):
        raise HarnessError(f"{path} is not a probe answers file of format {FORMAT} (`format`, `target`, `answers`)")
    try:
        outcomes = {key: Outcome.from_dict(value) for key, value in data["answers"].items()}
    except (TypeError, AttributeError) as error:
        raise HarnessError(f"{path}: an entry of `answers` is not an answer: {error}") from error
    return Recorded(str(data.get("target")), str(data.get("recorded_at")), outcomes)

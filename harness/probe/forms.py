"""Probes of the Files API's upload (`POST /v1/files`, `multipart/form-data`): a valid upload with
one defect in its parts (missing, duplicated, of the wrong kind), in a form field (`purpose`,
`expires_after[anchor]`, `expires_after[seconds]`: unknown, empty, malformed, out of range,
thousands of digits), or in the framing itself (no boundary, cut short, not a form at all).

Each form is written byte for byte here rather than by an HTTP client, which would not write a
duplicated or broken one. Whether OpenAI's description refuses it follows `CreateFileRequest`
(`file` and `purpose` required, `purpose` one of `FilePurpose`, no other field,
`expires_after` with both `anchor` (`created_at`) and `seconds` (its bounds from
`openai_bounds.json`)); where the description does not say (a duplicated part, a field sent as
a file), the probe is not counted as refused.
"""

from __future__ import annotations

from ...openai_contract.openai_bounds import bounds
from ..engine.targets import RawBody

BOUNDARY = "parity-probe-boundary"
FORM = f"multipart/form-data; boundary={BOUNDARY}"
Part = tuple[str, bytes, str | None]
"""A form part: its name, its content, and its filename (None: a text field)."""
FILE: Part = ("file", b"parity probe text\n", "parity.txt")
PURPOSE: Part = ("purpose", b"assistants", None)


def multipart(parts: list[Part], boundary: str = BOUNDARY) -> bytes:
    """The parts as a `multipart/form-data` body."""
    out = b""
    for name, content, filename in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n".encode()
        out += b"Content-Type: text/plain\r\n" if filename is not None else b""
        out += b"\r\n" + content + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


def _expiring(seconds: str | None, anchor: str | None = "created_at") -> list[Part]:
    return [FILE, PURPOSE, *([("expires_after[anchor]", anchor.encode(), None)] if anchor is not None else []),
            *([("expires_after[seconds]", seconds.encode(), None)] if seconds is not None else [])]


def form_cases() -> list[tuple[str, str, str, RawBody, bool]]:
    """(id suffix, field, defect, body, refused by OpenAI's description) of every upload probe."""
    low, high = (bounds("files.create")["expires_after.seconds"][key] for key in ("minimum", "maximum"))
    forms: list[tuple[str, str, str, list[Part], bool]] = [
        ("file.missing_required", "file", "missing_required", [PURPOSE], True),
        ("purpose.missing_required", "purpose", "missing_required", [FILE], True),
        ("file.wrong_type", "file", "wrong_type", [PURPOSE, ("file", b"not a file part", None)], True),
        ("file.duplicate", "file", "duplicate", [FILE, PURPOSE, FILE], False),
        ("file.empty", "file", "empty", [("file", b"", "empty.txt"), PURPOSE], False),
        ("file.oversized.filename", "file", "oversized", [("file", b"x", "f" * 5000 + ".txt"), PURPOSE], False),
        ("file.malformed.filename", "file", "malformed", [("file", b"x", "../../parity\\probe.txt"), PURPOSE], False),
        ("purpose.unknown_enum", "purpose", "unknown_enum", [FILE, ("purpose", b"parity_probe_unknown", None)], True),
        ("purpose.empty", "purpose", "empty", [FILE, ("purpose", b"", None)], True),
        ("purpose.oversized", "purpose", "oversized", [FILE, ("purpose", b"x" * 2**21, None)], True),
        ("purpose.malformed", "purpose", "malformed", [FILE, ("purpose", b"assist\xffants", None)], True),
        ("purpose.duplicate", "purpose", "duplicate", [FILE, PURPOSE, ("purpose", b"batch", None)], False),
        ("purpose.wrong_type", "purpose", "wrong_type", [FILE, ("purpose", b"assistants", "purpose.txt")], False),
        ("parity_probe_unknown_field.unknown_field", "parity_probe_unknown_field", "unknown_field",
         [FILE, PURPOSE, ("parity_probe_unknown_field", b"x", None)], True),
        ("body.oversized.parts", "body", "oversized",
         [FILE, PURPOSE, *((f"parity_probe_unknown_field_{i}", b"x", None) for i in range(40))], True),
        ("expires_after.seconds.missing_required", "expires_after.seconds", "missing_required",
         _expiring(None), True),
        ("expires_after.anchor.missing_required", "expires_after.anchor", "missing_required",
         _expiring(str(low), None), True),
        ("expires_after.anchor.unknown_enum", "expires_after.anchor", "unknown_enum", _expiring(str(low), "last_used"),
         True),
        ("expires_after.anchor.empty", "expires_after.anchor", "empty", _expiring(str(low), ""), True),
        ("expires_after.seconds.wrong_type", "expires_after.seconds", "wrong_type", _expiring("an hour"), True),
        ("expires_after.seconds.wrong_type.decimal", "expires_after.seconds", "wrong_type", _expiring(f"{low}.5"),
         True),
        ("expires_after.seconds.empty", "expires_after.seconds", "empty", _expiring(""), True),
        ("expires_after.seconds.out_of_range.low", "expires_after.seconds", "out_of_range", _expiring(str(low - 1)),
         True),
        ("expires_after.seconds.out_of_range.high", "expires_after.seconds", "out_of_range",
         _expiring(str(high + 1)), True),
        ("expires_after.seconds.out_of_range.negative", "expires_after.seconds", "out_of_range", _expiring("-1"),
         True),
        ("expires_after.seconds.oversized.digits", "expires_after.seconds", "oversized", _expiring("9" * 5000), True),
        ("expires_after.seconds.malformed.digit", "expires_after.seconds", "malformed", _expiring(f"{low}\u00b2"),
         True),
        ("expires_after.seconds.duplicate", "expires_after.seconds", "duplicate",
         [*_expiring(str(low)), ("expires_after[seconds]", b"not a number", None)], False),
    ]
    cases = [(suffix, field, defect, RawBody(FORM, multipart(parts)), refused)
             for suffix, field, defect, parts, refused in forms]
    valid = multipart([FILE, PURPOSE])
    cases += [
        ("body.malformed.no_boundary", "body", "malformed", RawBody("multipart/form-data", valid), True),
        ("body.malformed.cut_short", "body", "malformed", RawBody(FORM, valid[:-30]), True),
        ("body.malformed.other_boundary", "body", "malformed", RawBody(FORM, multipart([FILE, PURPOSE], "other")),
         True),
        ("body.malformed.garbage", "body", "malformed", RawBody(FORM, bytes(range(256)) * 8), True),
        ("body.empty", "body", "empty", RawBody(FORM, b""), True),
        ("body.wrong_type.json", "body", "wrong_type",
         RawBody("application/json", b'{"purpose": "assistants", "file": "parity"}'), True),
    ]
    return cases

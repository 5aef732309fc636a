"""Files written so a crash loses nothing: temp file + fsync + rename; the one reader of the JSON files a run keeps."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from rubricforge.errors import UserError


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: str | Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def read_json(path: str | Path, fix: str = "restore it or delete it to start that step over") -> dict[str, Any]:
    """The JSON object in ``path``; {} when the file is missing. Anything else is a UserError naming the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is not readable JSON ({type(exc).__name__})", fix) from None
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a JSON object", fix)
    return data



def check_writable_dir(path: str | Path, what: str, knob: str) -> None:
    """Raise a UserError (naming ``what`` and the ``knob`` that sets it) unless ``path`` is, or can be made,
    a writable folder."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{what} {path} is a file, not a folder", f"pass another path with {knob}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-check.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{what} {path} is not writable ({exc.strerror})",
                        f"pass a folder you can write to with {knob}") from None

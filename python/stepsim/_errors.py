"""stepsim's errors: the CLI's one-line messages, raised as Python exceptions."""
from __future__ import annotations

from typing import Optional, Tuple


def _split(message: str) -> Tuple[Optional[str], Optional[str]]:
    """The file and JSON path a CLI message starts with ("FILE: /json/path: value: expected ...")."""
    parts = message.split(": ")
    head = parts[0]
    looks_like_file = head.startswith("<") or "/" in head or "." in head
    if len(parts) < 2 or head.startswith("--") or not looks_like_file:
        return None, None
    path = parts[1] if parts[1].startswith("/") else None
    return head, path


class InputError(ValueError):
    """Bad input: the message the CLI prints (and exits 2 with), one line naming the file, the
    JSON path, the value and what was expected.

    Attributes:
        message: the whole message.
        file: the file (or ``<dict>`` for a dict given to the API) the message names, if any.
        json_path: the JSON pointer inside it (``/strategy/bucket_cap_mb``), if any.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message: str = message
        self.file, self.json_path = _split(message)

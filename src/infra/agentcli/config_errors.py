"""The one error of `lockyard init` / `uninstall` when a file cannot be edited safely."""

from __future__ import annotations

NOTHING_WRITTEN = "(nothing was written)"


class ConfigFileError(Exception):
    """An existing file cannot be edited safely; nothing was written. The message is one line
    that names the file and says what to do."""

"""The `lockyard` console script.

`lockyard hook` goes straight to its handler without loading typer, rich or the other
commands: agent CLIs run it on every tool call, so its start-up time is the hook's cost.
"""

from __future__ import annotations

import sys


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "hook":
        from .hook import main as hook_main

        raise SystemExit(hook_main(sys.argv[2:]))
    from .app import main as app_main

    app_main()

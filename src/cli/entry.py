"""The `lockyard` console script.

`lockyard hook` and `lockyard git-turn` go straight to their handlers without loading typer,
rich or the other commands: agent CLIs run the hook on every tool call, and git-turn runs in
front of an agent's git command lines, so their start-up time is their cost.
"""

from __future__ import annotations

import sys


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "hook":
        from .hook import main as hook_main

        raise SystemExit(hook_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "git-turn":
        from ..infra.gitturn.command import main as turn_main

        raise SystemExit(turn_main(sys.argv[2:]))
    from .app import main as app_main

    app_main()

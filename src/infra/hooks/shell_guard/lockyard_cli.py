"""`lockyard` run from an agent's shell: what only the operator may do.

An agent frees its own locks with the lock tools. Through its shell it could free other
agents' locks (`lockyard clean --agent bob`, `clean --all`), take the guards away
(`uninstall`, `init`), or start a lock server under another agent's name (`serve`,
`ipc-host`): these are refused whatever the agent holds, with a reason that sends it to the
operator. `status`, the dead-holders-only `clean`, `demo`, `monitor`, `hook` and `--help`
stay allowed. Writes under the lock directory itself are refused in `decide`.
"""

from __future__ import annotations

from typing import Final

from .effects import Arg, Effects
from .utilities import Place, Rule

_OPERATOR_ONLY: Final = {
    "uninstall": "removes the guards lockyard init installed",
    "init": "changes the agent CLIs' lockyard settings",
    "serve": "starts a lock server, which would act under an agent name of its own",
    "ipc-host": "starts a lock server for sandboxed agents",
}


def lockyard(args: list[Arg], place: Place) -> Effects:
    if not args or args[0] in ("-h", "--help", "--version"):
        return Effects()
    command, rest = args[0], args[1:]
    if "--help" in rest or "-h" in rest:
        return Effects()
    if command is None or any(arg is None for arg in rest):
        return Effects(refused=["`lockyard` is given arguments only known when it runs"])
    if command == "clean":
        for arg in rest:
            assert arg is not None
            if arg in ("--agent", "--all") or arg.startswith("--agent="):
                return Effects(
                    refused=[f"`lockyard clean {arg}` frees locks that live agents hold"]
                )
        return Effects()
    reason = _OPERATOR_ONLY.get(command)
    if reason is not None:
        return Effects(refused=[f"`lockyard {command}` {reason}"])
    return Effects()


RULES: Final[dict[str, Rule]] = {"lockyard": lockyard}

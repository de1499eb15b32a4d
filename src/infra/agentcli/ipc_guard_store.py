"""The write guard inside a sandbox: `lockyard hook pre-tool-use --ipc DIR`.

A sandboxed agent sees no lock store, only its IPC folder (docs/sandboxes.md). Its CLI's
pre-tool hook still runs the guards' own decision (`hook_runner`'s: the write, shell and
`git commit` guards), on an `IpcGuardStore`: a `GuardStore` whose answers come from the
host. Each question ("who holds src/app.py, and is my grant still good?") is a `check`
request in the folder; the host answers for the agent of that folder, and names it, so the
agent id comes from the folder, never from the hook or its payload.

Whatever goes wrong (no host, a host that does not answer in time, a refused request) ends
in a deny that says what to do: a guard that cannot judge a write refuses it.

Standard library only (one process per tool call): the folder's file operations and the
wire format, no pydantic, mcp or anyio.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from ..lockstore import CorruptRecordError, JournalRecord, open_checkout
from ..transports.ipc.folder import (
    HOST_STATUS,
    REQUESTS,
    RESPONSES,
    UnsafeFolderError,
    open_dir,
    read_untrusted,
    remove_entry,
    write_atomic,
)
from ..transports.ipc.wire import (
    MAX_CHECK_PATHS,
    MAX_DENIAL_REASON_CHARS,
    RATE_LIMITED,
    Request,
    WireError,
    encode_request,
    new_request_id,
    request_file_name,
)
from .formats import CliFormat, HookAnswer, ToolCall

ANSWER_TIMEOUT_SECONDS: Final = 15.0
"""How long the hook waits for the host's answer before it refuses the call."""
MAX_ANSWER_BYTES: Final = 4 * 1024 * 1024
_FIRST_POLL_SECONDS: Final = 0.0005
_LAST_POLL_SECONDS: Final = 0.01

Denial = Callable[[CliFormat, ToolCall, Any, str], "str | None"]
"""The guards' decision: (format, call, store, agent id) -> the reason to deny, or None."""


class HostUnavailableError(Exception):
    """The host cannot be asked, or did not answer; the message says what to do."""


class IpcGuardStore:
    """A read-only `GuardStore` for the agent of one sandbox folder, answered by its host.

    Answers are kept for the life of the object (one hook call), so a decision that asks
    about the same file twice costs one round trip.
    """

    def __init__(
        self, folder: str, repo: str | None, *, timeout: float = ANSWER_TIMEOUT_SECONDS
    ) -> None:
        self.folder = folder
        self.checkout = open_checkout(repo or os.getcwd())
        self.root: str = self.checkout.root
        self.namespace: str = self.checkout.namespace
        self.timeout = timeout
        self._agent: str | None = None
        self._by_key: dict[str, dict[str, Any]] = {}
        """The host's answer for each of this checkout's keys asked about."""
        self._denied: list[JournalRecord] = []

    # -- the GuardStore ---------------------------------------------------------------------

    def canonicalize(self, filepath: str) -> str:
        """The host's lock key of `filepath`; ValueError when the host refuses the path."""
        entry = self._entry(self.checkout.key(filepath))
        if "error" in entry:
            raise ValueError(str(entry["error"]))
        return str(entry["filepath"])

    def holder(self, filepath: str) -> str | None:
        entry = self._entry(self.checkout.key(filepath))
        if entry.get("unreadable"):
            raise CorruptRecordError(f"the host cannot read the lock record of {filepath}")
        holder = entry.get("holder")
        return holder if isinstance(holder, str) else None

    def stale_grant(self, filepath: str, agent_id: str) -> str | None:
        if agent_id != self.agent_id():
            return None
        lost = self._entry(self.checkout.key(filepath)).get("lost")
        return lost if isinstance(lost, str) else None

    def holds_of(self, keys: Sequence[str]) -> dict[str, tuple[str | None, tuple[str, ...]]]:
        """Each key's holder and readers, from the host's answers."""
        return {key: (self.holder(key), self.readers(key)) for key in keys}

    def readers(self, filepath: str) -> tuple[str, ...]:
        readers = self._entry(self.checkout.key(filepath)).get("readers")
        if not isinstance(readers, list):
            return ()
        return tuple(reader for reader in readers if isinstance(reader, str))

    def holder_below(self, key: str, agent_id: str) -> str | None:
        """Who the host says still holds something below this agent's own directory or glob
        lock `key` (the lock then still waits); None for another agent's question."""
        if agent_id != self.agent_id():
            return None
        below = self._entry(self.checkout.key(key)).get("below")
        return below if isinstance(below, str) else None

    def globs_over(self, key: str) -> tuple[str, ...]:
        """The glob locks the host says cover `key`, outermost first; their holders came in
        the same answer."""
        globs = self._entry(self.checkout.key(key)).get("globs")
        if not isinstance(globs, list):
            return ()
        return tuple(glob for glob in globs if isinstance(glob, str))

    def grant_fence(self, filepath: str, agent_id: str) -> int | None:
        """None: the host's answer carries no grant number (only the reason texts use one)."""
        return None

    def journal_write(self, record: JournalRecord) -> None:
        """Kept for `report_denied`: the journal is the host's."""
        self._denied.append(record)

    def report_denied(self) -> None:
        """Tell the host of the writes this call's guards refused, for its journal: one
        `denied` request per guard and reason, the files the host's keys. The agent is the
        folder's, as for a check. Never raises: the refusal has been decided already, and
        a host that cannot be told costs only its record."""
        by_denial: dict[tuple[str, str], list[str]] = {}
        for record in self._denied:
            files = by_denial.setdefault((record.guard or "write", record.reason or ""), [])
            if record.file:
                files.append(record.file)
        self._denied.clear()
        for (guard, reason), files in by_denial.items():
            arguments = {
                "guard": guard,
                "filepaths": files[:MAX_CHECK_PATHS],
                "reason": reason[:MAX_DENIAL_REASON_CHARS] or "refused",
            }
            try:
                self._round_trip(Request(new_request_id(), "denied", arguments=arguments))
            except HostUnavailableError:
                return

    # -- asking the host --------------------------------------------------------------------

    def agent_id(self) -> str:
        """This sandbox's agent id, as the host names its folder."""
        if self._agent is None:
            self.ask([])
        assert self._agent is not None
        return self._agent

    def ask(self, keys: list[str]) -> None:
        """One round trip for every key of `keys` not asked about yet (and the agent id)."""
        wanted = sorted({key for key in keys if key not in self._by_key})
        if not wanted and self._agent is not None:
            return
        answer = self._round_trip(
            Request(new_request_id(), "check", arguments={"filepaths": wanted})
        )
        check = answer.get("check")
        if not isinstance(check, dict):
            raise HostUnavailableError(f"the lockyard host refused the check: {_why(answer)}")
        self._agent = str(check["agent"])
        for entry in check["locks"]:
            self._by_key[str(entry["path"])] = entry

    def _entry(self, key: str) -> dict[str, Any]:
        if key not in self._by_key:
            self.ask([key])
        entry = self._by_key.get(key)
        if entry is None:
            raise HostUnavailableError(f"the lockyard host gave no answer about {key}")
        return entry

    def _round_trip(self, request: Request) -> dict[str, Any]:
        """`request` sent and its answer, once the host accepted it (`ok`)."""
        try:
            folder_fd = open_dir(self.folder)
        except UnsafeFolderError as exc:
            raise HostUnavailableError(
                f"the IPC folder {self.folder} cannot be used: {exc}"
            ) from None
        try:
            if not os.path.lexists(os.path.join(self.folder, HOST_STATUS)):
                raise HostUnavailableError(
                    f"no lockyard ipc-host serves the IPC folder {self.folder} (it has no "
                    f"{HOST_STATUS})"
                )
            answer = self._send_and_wait(folder_fd, request)
            wait = _retry_after(answer)
            if wait is not None:  # rate-limited: once more, after the wait the host named
                time.sleep(min(wait, 1.0))
                again = Request(new_request_id(), request.kind, arguments=request.arguments)
                answer = self._send_and_wait(folder_fd, again)
        finally:
            os.close(folder_fd)
        if answer.get("ok") is not True:
            raise HostUnavailableError(
                f"the lockyard host refused the {request.kind}: {_why(answer)}"
            )
        return answer

    def _send_and_wait(self, folder_fd: int, request: Request) -> dict[str, Any]:
        name = request_file_name(request.id)
        requests_fd = open_dir(REQUESTS, parent_fd=folder_fd)
        try:
            write_atomic(requests_fd, name, encode_request(request))
            answer = self._wait_for(folder_fd, name)
            if answer is None and remove_entry(requests_fd, name):
                raise HostUnavailableError(
                    f"the lockyard host did not read the {request.kind} within {self.timeout:g} s"
                )
        finally:
            os.close(requests_fd)
        if answer is None:
            raise HostUnavailableError(
                f"the lockyard host did not answer the {request.kind} within {self.timeout:g} s"
            )
        return answer

    def _wait_for(self, folder_fd: int, name: str) -> dict[str, Any] | None:
        """The answer `responses/<name>` once it is there (then removed); None on timeout."""
        deadline = time.monotonic() + self.timeout
        pause = _FIRST_POLL_SECONDS
        while True:
            try:
                responses_fd = open_dir(RESPONSES, parent_fd=folder_fd)
            except UnsafeFolderError:
                responses_fd = -1
            if responses_fd >= 0:
                try:
                    raw = read_untrusted(responses_fd, name, MAX_ANSWER_BYTES)
                except FileNotFoundError:
                    raw = None
                except (OSError, WireError) as exc:
                    raise HostUnavailableError(f"the host's answer cannot be read: {exc}") from None
                else:
                    remove_entry(responses_fd, name)
                finally:
                    os.close(responses_fd)
                if raw is not None:
                    return _parse_answer(raw)
            if time.monotonic() >= deadline:
                return None
            time.sleep(pause)
            pause = min(pause * 2, _LAST_POLL_SECONDS)


def _parse_answer(raw: bytes) -> dict[str, Any]:
    try:
        answer = json.loads(raw)
    except (ValueError, RecursionError):
        raise HostUnavailableError("the host's answer is not JSON") from None
    if not isinstance(answer, dict):
        raise HostUnavailableError("the host's answer is not a JSON object")
    return answer


def _retry_after(answer: dict[str, Any]) -> float | None:
    error = answer.get("error")
    if not isinstance(error, dict) or error.get("code") != RATE_LIMITED:
        return None
    wait = error.get("retry_after")
    return float(wait) if isinstance(wait, int | float) else 0.0


def _why(answer: dict[str, Any]) -> str:
    error = answer.get("error")
    if isinstance(error, dict):
        return f"{error.get('code')}: {error.get('message')}"
    return "an answer without a check"


def judge_in_sandbox(
    fmt: CliFormat, call: ToolCall, folder: str, repo: str | None, denial: Denial
) -> HookAnswer:
    """The guards' answer to `call`, with the host answering through the IPC folder."""
    try:
        store = IpcGuardStore(folder, repo)
        store.ask(_keys_written(store, call))  # the agent id and the files: one round trip
        reason = denial(fmt, call, store, store.agent_id())
        store.report_denied()
    except HostUnavailableError as exc:
        if call.kind == "read":
            # A read is never refused: without the host it goes unnoted (the host names the
            # agent whose sighting it would be).
            return fmt.allow()
        return fmt.deny(
            f"lockyard's guard could not ask the host about this call ({exc}), so it is "
            "refused. Retry it shortly; if it is refused again, ask the operator whether "
            "`lockyard ipc-host` is running for this sandbox."
        )
    return fmt.allow() if reason is None else fmt.deny(reason)


def _keys_written(store: IpcGuardStore, call: ToolCall) -> list[str]:
    """This checkout's keys of the files a write call names (a shell command's targets are
    found by the shell guard, and asked about as it finds them)."""
    keys = []
    for path in call.paths:
        absolute = path if os.path.isabs(path) or not call.cwd else os.path.join(call.cwd, path)
        try:
            keys.append(store.checkout.key(absolute))
        except ValueError:
            continue  # outside the checkout, or no file path: the guard judges it alone
    return keys

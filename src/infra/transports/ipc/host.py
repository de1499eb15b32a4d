"""`lockyard ipc-host`: the lock tools for every sandbox folder under one root.

Each folder `<root>/<name>/` is one sandbox, and `name` is its agent id: a request is run as
the agent of the folder it was found in, whatever it says (the agent id comes from the
folder, never from the payload). All sandboxes share one lock store and one in-process deadlock
monitor, so contention, FIFO handoff and soft deadlock resolution between sandboxes work as
between agents of one orchestrator.

The host wakes by inotify on every `requests/` directory (rescanning every second as well,
and polling where inotify is unavailable). Requests are served round-robin, at most
`per_round` per sandbox before the next sandbox's turn, so a flooding sandbox cannot starve
the others; past its rate limit or its in-flight limit a request is refused unread.

Liveness: a sandbox proves it is alive by changing its `heartbeat` file or by sending a
request, as observed on the host's own clock (file times are never trusted). A sandbox that
held locks or had calls in flight and then stays silent for `stale_after` seconds is taken for
stopped: its pending calls are cancelled and its locks released, and its next call is told so.

Nothing one sandbox does, and no error of the lock store, ends the host for the others: a
reclaim runs in a task of its own (on PostgreSQL its store calls run in a worker thread, so
the host keeps serving while the server takes its time), and one the store refused is tried
again at every liveness check for as long as the sandbox stays silent.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup, TaskStatus

from ....core.deadlock_info import DeadlockInfo
from ....core.events import LockEvent, LockEventType
from ....domain.monitor import DeadlockMonitor
from ...crossproc.cycle_check import cycle_stands
from ...crossproc.notices import AnyVictimNotices, FileVictimNotices
from ...crossproc.state import WaitForReader
from ...lockstore import (
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_MOVE_SELF,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_Q_OVERFLOW,
    Inotify,
    InvalidAgentIdError,
    LockBackend,
    LockStore,
    journal_denied_writes,
    store_call,
    validate_agent_id,
)
from ...tools.lock_tools import TOOL_NAMES, TOOL_SPECS, LockTools, ToolOutcome, ToolSpec
from .folder import (
    HEARTBEAT,
    HOST_STATUS,
    MAX_HEARTBEAT_BYTES,
    REQUESTS,
    RESPONSES,
    UnsafeFolderError,
    open_dir,
    read_small,
    read_untrusted,
    remove_entry,
    write_atomic,
)
from .guard_check import check_locks
from .operator_tools import OPERATOR_SPECS, OPERATOR_TOOL_NAMES, OperatorTools
from .ratelimit import TokenBucket
from .wire import (
    BAD_REQUEST,
    MAX_REQUEST_BYTES,
    RATE_LIMITED,
    RECLAIMED,
    SHUTTING_DOWN,
    TEMP_PREFIX,
    TOO_MANY_IN_FLIGHT,
    UNREADABLE,
    WIRE_VERSION,
    Request,
    WireError,
    encode_check,
    encode_refusal,
    encode_result,
    encode_tools,
    parse_request,
    request_id_of,
)

log = logging.getLogger("lockyard.ipc.host")

MAX_UNCLAIMED_RESPONSES: Final = 256
"""Per sandbox; past this the oldest unread response is deleted (a sandbox that never reads
its responses cannot fill the disk)."""
MAX_STUCK_ENTRIES: Final = 1024
RETRY_OPEN_SECONDS: Final = 0.25
"""A request file the host cannot open yet (EAGAIN: a lease on it) is tried again after this,
at the next pass over the sandbox's requests (a rescan at the latest)."""
GIVE_UP_OPEN_SECONDS: Final = 120.0
"""...and refused (`unreadable`) once it has stayed unopenable this long: far past the
kernel's default lease-break time (45 s), after which a lease is broken by force."""
_ROOT_MASK: Final = IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM
_SANDBOX_MASK: Final = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM
_REQUESTS_MASK: Final = IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF


@dataclass(frozen=True)
class HostSettings:
    """How the host treats sandboxes; every figure is per sandbox."""

    stale_after: float = 20.0
    """Silence (no heartbeat change, no request) after which a sandbox's locks are reclaimed."""
    rate: float = 50.0
    """Requests per second on average."""
    burst: float = 100.0
    """Requests at once before the rate applies."""
    max_in_flight: int = 32
    """Calls running at once (waiting lock_acquire calls count)."""
    per_round: int = 16
    """Requests taken from one sandbox before the next sandbox's turn."""
    rescan_interval: float = 1.0
    """Full rescan and liveness check cadence (inotify does the rest)."""
    status_interval: float = 5.0
    """How often `host.json` is rewritten in every folder (the host's own heartbeat)."""
    cross_process: bool = False
    """Also heed `lockyard monitor`'s victim notices (agents of other processes share the
    lock directory)."""

    def __post_init__(self) -> None:
        if not self.stale_after > 0 or not self.rescan_interval > 0:
            raise ValueError("stale_after and rescan_interval must be positive seconds")
        if self.max_in_flight < 1 or self.per_round < 1:
            raise ValueError("max_in_flight and per_round must be at least 1")


@dataclass
class Sandbox:
    """What the host knows of one sandbox folder."""

    name: str
    fd: int
    tools: LockTools
    bucket: TokenBucket
    last_seen: float
    heartbeat: bytes | None = None
    active: bool = False
    """Sent a request since it was last reclaimed: its silence then matters."""
    in_flight: int = 0
    scopes: dict[str, anyio.CancelScope] = field(default_factory=dict)
    """The running calls, by request id."""
    notices: list[Mapping[str, Any]] = field(default_factory=list)
    unclaimed: deque[str] = field(default_factory=deque)
    stuck: set[str] = field(default_factory=set)
    """Request entries refused but not removable (non-empty directories): skipped."""
    withdrawn: set[str] = field(default_factory=set)
    """Calls the sandbox cancelled: they end without an answer."""
    unopened: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Request files the host could not open yet (EAGAIN): name -> (first try, next try)."""
    reclaiming: bool = False
    """A reclaim task runs: the sandbox's requests wait until it has ended."""
    reclaim_failures: int = 0
    """Reclaims in a row that the store refused (each is tried again)."""
    backlog: bool = False
    """More requests were waiting when its turn ended."""
    beats: int = 0


class IpcHost:
    """Serves every sandbox folder under `root` on `store` until cancelled."""

    def __init__(
        self,
        root: Path,
        store: LockBackend,
        *,
        admin: str | None = None,
        settings: HostSettings | None = None,
    ) -> None:
        self.root = Path(root)
        self.store = store
        self.admin = admin
        self.settings = settings if settings is not None else HostSettings()
        self.monitor = DeadlockMonitor(self._on_deadlock, verify_cycle=self._verify_cycle)
        self.victim_notices: Any = self.monitor
        if self.settings.cross_process:
            if not isinstance(store, LockStore):
                raise ValueError("cross_process needs the lock directory backend (LockStore)")
            on_disk = FileVictimNotices(store.lock_dir, WaitForReader(store).still_waiting)
            self.victim_notices = AnyVictimNotices(self.monitor, on_disk)
        self.sandboxes: dict[str, Sandbox] = {}
        self.operator: OperatorTools | None = None
        if admin is not None:
            self.operator = OperatorTools(
                store, admin, self.sandbox_report, self.tell, emit_lock_event=self._emit
            )
        self._root_fd = -1
        self._group: TaskGroup | None = None
        self._inotify: Inotify | None = None
        self._refused_names: set[str] = set()
        self._started = time.time()
        self._status_due = 0.0
        self._stopping = False

    # -- running ---------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; then cancel pending calls and release every sandbox's locks."""
        self._root_fd = open_dir(str(self.root))
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                with Inotify.open() or _NoInotify() as inotify:
                    self._inotify = inotify if isinstance(inotify, Inotify) else None
                    self._watch(self.root, _ROOT_MASK)
                    self._discover()
                    self._serve_all()
                    task_status.started()
                    await self._loop()
        finally:
            self._stopping = True
            with anyio.CancelScope(shield=True):
                await self._release_everything()
            for sandbox in self.sandboxes.values():
                os.close(sandbox.fd)
            self.sandboxes.clear()
            os.close(self._root_fd)

    async def _loop(self) -> None:
        next_rescan = time.monotonic() + self.settings.rescan_interval
        while True:
            backlog = any(s.backlog for s in self.sandboxes.values())
            due = min(next_rescan, self._status_due)
            wait = 0.0 if backlog else max(0.0, due - time.monotonic())
            if self._inotify is not None:
                events = await self._inotify.wait(wait)
                self._on_events(events)
            else:
                await anyio.sleep(min(wait, 0.05))
                self._serve_all()
            if backlog:
                self._serve_all(only_backlog=True)
                await anyio.lowlevel.checkpoint()
            now = time.monotonic()
            if now >= next_rescan:
                next_rescan = now + self.settings.rescan_interval
                self._discover()
                self._serve_all()
                await self._check_liveness()
            if now >= self._status_due:
                self._status_due = now + self.settings.status_interval
                self._write_host_status()

    def _on_events(self, events: list[Any]) -> None:
        touched: set[str] = set()
        rediscover = False
        assert self._inotify is not None
        for event in events:
            if event.mask & IN_Q_OVERFLOW:
                rediscover = True
                touched.update(self.sandboxes)
                continue
            path = self._inotify.path_of(event.wd)
            if path is None:
                continue
            if path == self.root:
                rediscover = True
            elif path.parent == self.root:  # a sandbox folder itself
                if event.name == HEARTBEAT:
                    self._note_heartbeat(path.name)
                elif event.name == REQUESTS:
                    rediscover = True  # replaced or recreated: watch the new one
                    touched.add(path.name)
            else:  # a requests directory
                touched.add(path.parent.name)
        if rediscover:
            self._discover()
        for name in touched:
            sandbox = self.sandboxes.get(name)
            if sandbox is not None:
                self._serve(sandbox)

    # -- sandboxes -------------------------------------------------------------------------

    def _discover(self) -> None:
        """Pick up new sandbox folders (and watch them); forget vanished ones' descriptors."""
        try:
            names = {entry.name for entry in os.scandir(self._root_fd) if _is_dir(entry)}
        except OSError as exc:
            log.error("cannot list %s: %s", self.root, exc)
            return
        for name in sorted(names - set(self.sandboxes)):
            self._add_sandbox(name)
        for name, sandbox in self.sandboxes.items():
            if name in names:
                self._watch_requests(sandbox)

    def _add_sandbox(self, name: str) -> None:
        if name.startswith(".") or name in self._refused_names:
            return
        try:
            agent = validate_agent_id(name)
        except InvalidAgentIdError as exc:
            self._refused_names.add(name)
            log.warning("ignoring folder %r: not usable as an agent id (%s)", name, exc)
            return
        try:
            fd = open_dir(name, parent_fd=self._root_fd)
        except UnsafeFolderError as exc:
            log.warning("ignoring %r: %s", name, exc)
            return
        tools = LockTools(
            self.store,
            agent,
            emit_lock_event=self._emit,
            victim_notices=self.victim_notices,
        )
        sandbox = Sandbox(
            name=name,
            fd=fd,
            tools=tools,
            bucket=TokenBucket(self.settings.rate, self.settings.burst),
            last_seen=time.monotonic(),
        )
        sandbox.heartbeat = read_small(fd, HEARTBEAT, MAX_HEARTBEAT_BYTES)
        self.sandboxes[name] = sandbox
        self.monitor.register_agent(agent)
        self._watch(self.root / name, _SANDBOX_MASK)
        self._watch_requests(sandbox)
        self._write_status_file(sandbox)
        log.info("serving sandbox %s%s", name, " (admin)" if name == self.admin else "")

    def _watch(self, path: Path, mask: int) -> None:
        if self._inotify is None:
            return
        try:
            self._inotify.watch(path, mask)
        except OSError as exc:  # e.g. the watch limit: the rescan still serves it
            log.debug("cannot watch %s: %s", path, exc)

    def _watch_requests(self, sandbox: Sandbox) -> None:
        """Make sure `requests/` exists as a real directory, and watch it."""
        try:
            fd = open_dir(REQUESTS, parent_fd=sandbox.fd, create=True)
            os.close(fd)
            os.close(open_dir(RESPONSES, parent_fd=sandbox.fd, create=True))
        except OSError as exc:
            log.debug("sandbox %s: %s", sandbox.name, exc)
            return
        self._watch(self.root / sandbox.name / REQUESTS, _REQUESTS_MASK)

    def _note_heartbeat(self, name: str) -> None:
        sandbox = self.sandboxes.get(name)
        if sandbox is None:
            return
        beat = read_small(sandbox.fd, HEARTBEAT, MAX_HEARTBEAT_BYTES)
        if beat is not None and beat != sandbox.heartbeat:
            sandbox.heartbeat = beat
            sandbox.last_seen = time.monotonic()

    # -- requests --------------------------------------------------------------------------

    def _serve_all(self, *, only_backlog: bool = False) -> None:
        for sandbox in list(self.sandboxes.values()):
            if not only_backlog or sandbox.backlog:
                self._serve(sandbox)

    def _serve(self, sandbox: Sandbox) -> None:
        """Take up to `per_round` requests from the sandbox's `requests/`."""
        sandbox.backlog = False
        if sandbox.reclaiming:
            return  # served once its reclaim has ended (a call now could lose its locks to it)
        try:
            requests_fd = open_dir(REQUESTS, parent_fd=sandbox.fd)
        except OSError:
            return  # missing or replaced by a non-directory: nothing to serve
        try:
            taken = examined = 0
            now = time.monotonic()
            with os.scandir(requests_fd) as entries:
                for entry in entries:
                    examined += 1
                    if taken >= self.settings.per_round or examined > 4 * self.settings.per_round:
                        sandbox.backlog = True
                        break
                    if entry.name.startswith(TEMP_PREFIX) or entry.name in sandbox.stuck:
                        continue  # being written, or already refused and not removable
                    unopened = sandbox.unopened.get(entry.name)
                    if unopened is not None and now < unopened[1]:
                        continue  # could not be opened a moment ago: tried again shortly
                    taken += 1
                    self._take(sandbox, requests_fd, entry.name)
        except OSError as exc:
            log.debug("sandbox %s: cannot list requests: %s", sandbox.name, exc)
        finally:
            os.close(requests_fd)

    def _take(self, sandbox: Sandbox, requests_fd: int, name: str) -> None:
        request_id = request_id_of(name)
        if request_id is None:
            self._discard(sandbox, requests_fd, name)  # not a request; nobody waits for it
            return
        # A request tried before paid its token then: its retry is not charged again.
        retry_after = None if name in sandbox.unopened else sandbox.bucket.take()
        if retry_after is not None:
            self._discard(sandbox, requests_fd, name)
            self._refuse(
                sandbox,
                request_id,
                WireError(
                    RATE_LIMITED,
                    f"sandbox {sandbox.name} sent more than {self.settings.rate:g} requests per "
                    f"second (burst {self.settings.burst:g}); the request was not run. Wait "
                    f"{retry_after:.2f} s and send it again",
                    retry_after=retry_after,
                ),
            )
            return
        try:
            raw = read_untrusted(requests_fd, name, MAX_REQUEST_BYTES)
        except FileNotFoundError:
            sandbox.unopened.pop(name, None)
            return
        except WireError as exc:
            sandbox.unopened.pop(name, None)
            self._discard(sandbox, requests_fd, name)
            self._refuse(sandbox, request_id, exc)
            return
        except BlockingIOError as exc:  # EAGAIN: a lease on it, being broken: try again
            if self._open_later(sandbox, name):
                return
            self._unreadable(sandbox, requests_fd, name, request_id, exc)
            return
        except OSError as exc:
            self._unreadable(sandbox, requests_fd, name, request_id, exc)
            return
        sandbox.unopened.pop(name, None)
        if not remove_entry(requests_fd, name):
            return  # withdrawn by the sandbox meanwhile
        sandbox.last_seen = time.monotonic()
        sandbox.active = True
        try:
            request = parse_request(raw, request_id)
        except WireError as exc:
            self._refuse(sandbox, request_id, exc)
            return
        if request.kind == "cancel":
            scope = sandbox.scopes.get(request.target or "")
            if scope is not None:  # the client gave up on it: run its cleanup, answer nothing
                sandbox.withdrawn.add(request.target or "")
                scope.cancel()
            return
        if request.id in sandbox.scopes:
            # Its answer would be the running call's too, and a reclaim or a cancel must
            # find every call: a reused id never hides one.
            self._refuse(
                sandbox,
                request_id,
                WireError(
                    BAD_REQUEST,
                    f"request id {request.id!r} is the id of a call of this sandbox that is "
                    "still running; the request was not run. Give every request a new id "
                    "(128 random bits)",
                ),
            )
            return
        if request.kind == "list_tools":
            self._respond(sandbox, request_id, encode_tools(request_id, self.tool_list(sandbox)))
            return
        if sandbox.in_flight >= self.settings.max_in_flight:
            self._refuse(
                sandbox,
                request_id,
                WireError(
                    TOO_MANY_IN_FLIGHT,
                    f"sandbox {sandbox.name} has {sandbox.in_flight} calls running (the limit is "
                    f"{self.settings.max_in_flight}); the request was not run. Wait for one "
                    "to return and send it again",
                ),
            )
            return
        sandbox.in_flight += 1
        # Registered before the task starts, so a cancel read in this same pass finds it.
        sandbox.scopes[request.id] = anyio.CancelScope()
        assert self._group is not None
        self._group.start_soon(self._run_call, sandbox, request)

    def _open_later(self, sandbox: Sandbox, name: str) -> bool:
        """Note that `name` could not be opened; False once it is time to give up on it."""
        now = time.monotonic()
        first, _next = sandbox.unopened.get(name, (now, now))
        if now - first >= GIVE_UP_OPEN_SECONDS or (
            name not in sandbox.unopened and len(sandbox.unopened) >= MAX_STUCK_ENTRIES
        ):
            return False
        if name not in sandbox.unopened:
            log.info("sandbox %s: %s cannot be opened yet (a lease?); retrying", sandbox.name, name)
        sandbox.unopened[name] = (first, now + RETRY_OPEN_SECONDS)
        return True

    def _unreadable(
        self, sandbox: Sandbox, requests_fd: int, name: str, request_id: str, exc: OSError
    ) -> None:
        """Answer a request file the host cannot read, and remove it."""
        sandbox.unopened.pop(name, None)
        log.warning("sandbox %s: cannot read %s: %s", sandbox.name, name, exc)
        self._discard(sandbox, requests_fd, name)
        self._refuse(
            sandbox,
            request_id,
            WireError(
                UNREADABLE,
                f"the host could not open {REQUESTS}/{name} ({exc.strerror or exc}); the "
                "request was not run. Write it again as a new plain file the host may read "
                "(mode 0644), with no lease or lock held on it",
            ),
        )

    def _discard(self, sandbox: Sandbox, requests_fd: int, name: str) -> None:
        """Remove a request entry; one that cannot be removed (a non-empty directory) is
        remembered and skipped from then on, so it is answered once, not on every pass."""
        if not remove_entry(requests_fd, name) and len(sandbox.stuck) < MAX_STUCK_ENTRIES:
            try:
                os.stat(name, dir_fd=requests_fd, follow_symlinks=False)
            except OSError:
                return  # gone after all
            sandbox.stuck.add(name)

    def tool_list(self, sandbox: Sandbox) -> list[dict[str, Any]]:
        specs: tuple[ToolSpec, ...] = TOOL_SPECS
        if sandbox.name == self.admin:
            specs += OPERATOR_SPECS
        return [
            {"name": s.name, "description": s.description, "input_schema": dict(s.input_schema)}
            for s in specs
        ]

    async def _run_call(self, sandbox: Sandbox, request: Request) -> None:
        scope = sandbox.scopes[request.id]
        outcome: ToolOutcome | None = None
        try:
            with scope:
                if request.kind == "check":
                    outcome = await self._check(sandbox, request)
                elif request.kind == "denied":
                    outcome = await self._journal_denied(sandbox, request)
                else:
                    outcome = await self._dispatch(sandbox, request.tool or "", request.arguments)
        except Exception as exc:  # the tools catch their own; this is a bug, not the sandbox's
            log.exception("sandbox %s: %s failed", sandbox.name, request.tool or request.kind)
            what = request.tool or request.kind
            outcome = ToolOutcome.error(f"{what} failed: {exc}. Tell the operator.")
        except BaseException:  # the host is stopping
            self._refuse(sandbox, request.id, _shutdown_refusal())
            raise
        finally:
            sandbox.scopes.pop(request.id, None)
            sandbox.in_flight -= 1
        if request.id in sandbox.withdrawn:  # cancelled by the sandbox: nobody waits
            sandbox.withdrawn.discard(request.id)
            return
        if outcome is None:  # cancelled by a reclaim
            self._refuse(
                sandbox,
                request.id,
                WireError(
                    RECLAIMED,
                    f"sandbox {sandbox.name} was silent for over {self.settings.stale_after:g} s "
                    "(no heartbeat), so its calls were cancelled and its locks released; lock "
                    "your files again",
                ),
            )
            return
        if request.kind == "check" and outcome.data is not None:
            body = encode_check(request.id, sandbox.name, outcome.data["locks"])
            self._respond(sandbox, request.id, body)
            return
        if request.kind == "denied":  # no notices: they wait for the agent's next lock call
            self._respond(sandbox, request.id, encode_result(request.id, "", is_error=False))
            return
        outcome = self._with_notices(sandbox, outcome)
        self._respond(
            sandbox, request.id, encode_result(request.id, outcome.text, outcome.is_error)
        )

    async def _check(self, sandbox: Sandbox, request: Request) -> ToolOutcome:
        """The sandbox's write guard asks who holds the files it is about to write."""
        paths = (request.arguments or {}).get("filepaths", [])
        locks = await store_call(self.store, check_locks, self.store, sandbox.name, paths)
        return ToolOutcome.success({"agent": sandbox.name, "locks": locks})

    async def _journal_denied(self, sandbox: Sandbox, request: Request) -> ToolOutcome:
        """The sandbox's guard refused a write: the host's journal records it, for the agent
        of the folder (whatever the request says)."""
        arguments = request.arguments or {}
        await store_call(
            self.store, journal_denied_writes, self.store, sandbox.name, arguments["guard"],
            arguments["filepaths"], arguments["reason"],
        )  # fmt: skip
        return ToolOutcome.success({})

    async def _dispatch(
        self, sandbox: Sandbox, tool: str, arguments: Mapping[str, Any] | None
    ) -> ToolOutcome:
        if tool in OPERATOR_TOOL_NAMES:
            if self.operator is None or sandbox.name != self.admin:
                return ToolOutcome.error(
                    f"{tool} is an operator tool: only the admin sandbox may call it, and "
                    f"{sandbox.name} is not it. Ask the operator."
                )
            return await self.operator.call(tool, arguments)
        if tool not in TOOL_NAMES:
            known = ", ".join(spec["name"] for spec in self.tool_list(sandbox))
            return ToolOutcome.error(f"Unknown tool {tool!r}. This server has: {known}.")
        return await sandbox.tools.call(tool, arguments)

    def _with_notices(self, sandbox: Sandbox, outcome: ToolOutcome) -> ToolOutcome:
        """A successful result carries what happened to the sandbox's locks since its last call."""
        if not sandbox.notices or outcome.is_error or outcome.data is None:
            return outcome
        notices, sandbox.notices = sandbox.notices, []
        return ToolOutcome.success({**outcome.data, "notices": [dict(n) for n in notices]})

    def tell(self, agent: str, notice: Mapping[str, Any]) -> bool:
        sandbox = self.sandboxes.get(agent)
        if sandbox is None:
            return False
        sandbox.notices.append(notice)
        return True

    # -- answers ---------------------------------------------------------------------------

    def _refuse(self, sandbox: Sandbox, request_id: str, error: WireError) -> None:
        log.debug("sandbox %s: refused %s: %s", sandbox.name, request_id, error)
        self._respond(sandbox, request_id, encode_refusal(request_id, error))

    def _respond(self, sandbox: Sandbox, request_id: str, body: bytes) -> None:
        name = f"{request_id}.json"
        try:
            responses_fd = open_dir(RESPONSES, parent_fd=sandbox.fd, create=True)
        except OSError as exc:
            log.warning("sandbox %s: cannot answer %s: %s", sandbox.name, request_id, exc)
            return
        try:
            write_atomic(responses_fd, name, body)
            sandbox.unclaimed.append(name)
            while len(sandbox.unclaimed) > MAX_UNCLAIMED_RESPONSES:
                remove_entry(responses_fd, sandbox.unclaimed.popleft())
        except OSError as exc:  # e.g. the sandbox put a directory at that name
            log.warning("sandbox %s: cannot answer %s: %s", sandbox.name, request_id, exc)
        finally:
            os.close(responses_fd)

    def _write_host_status(self) -> None:
        for sandbox in self.sandboxes.values():
            self._write_status_file(sandbox)

    def _write_status_file(self, sandbox: Sandbox) -> None:
        sandbox.beats += 1
        body = {
            "version": WIRE_VERSION,
            "pid": os.getpid(),
            "started_at": round(self._started, 3),
            "beat": sandbox.beats,
            "sandbox": sandbox.name,
            "admin": sandbox.name == self.admin,
            "stale_after": self.settings.stale_after,
            "status_interval": self.settings.status_interval,
        }
        try:
            write_atomic(sandbox.fd, HOST_STATUS, json.dumps(body).encode())
        except OSError as exc:
            log.debug("sandbox %s: cannot write %s: %s", sandbox.name, HOST_STATUS, exc)

    # -- liveness --------------------------------------------------------------------------

    async def _check_liveness(self) -> None:
        now = time.monotonic()
        for sandbox in list(self.sandboxes.values()):
            self._note_heartbeat(sandbox.name)  # covers lost events and polling
            silent = now - sandbox.last_seen
            # Running calls count too: a call must never outlive a reclaim unnoticed.
            due = sandbox.active or bool(sandbox.scopes)
            if due and silent > self.settings.stale_after and not sandbox.reclaiming:
                sandbox.reclaiming = True
                assert self._group is not None
                self._group.start_soon(self._reclaim_task, sandbox, silent)

    async def _reclaim_task(self, sandbox: Sandbox, silent_for: float) -> None:
        """One reclaim, in a task of its own: the host serves the others meanwhile."""
        try:
            await self.reclaim(sandbox, silent_for)
        except Exception:  # a bug; the next liveness check tries again
            log.exception("sandbox %s: the reclaim failed", sandbox.name)
        finally:
            sandbox.reclaiming = False
        if sandbox.name in self.sandboxes and not self._stopping:
            self._serve(sandbox)  # what it sent while it was being reclaimed

    async def reclaim(self, sandbox: Sandbox, silent_for: float) -> list[str] | None:
        """Cancel the sandbox's calls and release its locks: it has stopped. None when the
        store refused the release: the sandbox stays due, and the next check tries again."""
        cancelled = list(sandbox.scopes.values())
        for scope in cancelled:
            scope.cancel()
        await anyio.lowlevel.checkpoint()  # let the cancelled calls give back what they took
        released = await self._release_agent(sandbox.name)
        if released is None:
            sandbox.reclaim_failures += 1
            return None
        sandbox.active = False
        retried = sandbox.reclaim_failures
        sandbox.reclaim_failures = 0
        log.log(
            logging.WARNING if cancelled or released or retried else logging.DEBUG,
            "sandbox %s silent for %.1f s: cancelled %d call(s), released %d lock(s)%s%s",
            sandbox.name, silent_for, len(cancelled), len(released),
            f": {', '.join(released)}" if released else "",
            f" (after {retried} failed attempt(s))" if retried else "",
        )  # fmt: skip
        if released:
            self.tell(
                sandbox.name,
                {
                    "kind": "reclaimed",
                    "released": released,
                    "message": (
                        f"Your sandbox sent no heartbeat for {silent_for:.0f} s, so the host "
                        f"released your locks: {', '.join(released)}. Lock them again before "
                        "editing them."
                    ),
                },
            )
        return released

    async def _release_agent(self, agent: str) -> list[str] | None:
        """Release every lock of `agent` and tell the monitor; None when the store failed
        (unreachable, a damaged record, ...): logged, and nothing is assumed released."""
        try:
            released = sorted(await store_call(self.store, self.store.cleanup_agent_locks, agent))
        except Exception as exc:  # the store's trouble must not end the host
            sandbox = self.sandboxes.get(agent)
            first = sandbox is None or sandbox.reclaim_failures == 0
            log.log(
                logging.ERROR if first else logging.DEBUG,
                "cannot release the locks of %s: %s%s",
                agent, exc, "; trying again every check while it stays silent" if first else "",
            )  # fmt: skip
            return None
        for key in released:
            await self.monitor.handle_event(
                LockEvent(event_type=LockEventType.RELEASED, agent_id=agent, lock_path=key)
            )
        return released

    async def _release_everything(self) -> None:
        for sandbox in self.sandboxes.values():
            for key in await self._release_agent(sandbox.name) or ():
                log.info("released %s held by sandbox %s (host stopped)", key, sandbox.name)

    # -- deadlocks -------------------------------------------------------------------------

    async def _emit(self, event: LockEvent) -> None:
        await self.monitor.handle_event(event)

    async def _verify_cycle(self, info: DeadlockInfo) -> bool:
        return await store_call(self.store, self._cycle_stands, info)

    def _cycle_stands(self, info: DeadlockInfo) -> bool:
        return cycle_stands(self.store, info)

    def _on_deadlock(self, info: DeadlockInfo) -> None:
        log.warning("deadlock between sandboxes: %s", info.describe())

    def sandbox_report(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [
            {
                "name": s.name,
                "admin": s.name == self.admin,
                "seconds_since_seen": round(now - s.last_seen, 1),
                "alive": not s.active or now - s.last_seen <= self.settings.stale_after,
                "calls_in_flight": s.in_flight,
            }
            for s in self.sandboxes.values()
        ]


def _shutdown_refusal() -> WireError:
    return WireError(SHUTTING_DOWN, "the lockyard host is stopping; the call was not completed")


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


class _NoInotify:
    """Stands in for an Inotify when it is unavailable: the host then polls."""

    def __enter__(self) -> _NoInotify:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

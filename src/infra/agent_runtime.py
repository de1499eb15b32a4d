"""Wiring for implementer agents: `ClaudeAgentOptions` with the lock tools, hooks and prompt.

Two entry points:

- `AgentRuntimeBuilder(repo, store=..., monitor=...).build()` -> `AgentRuntime` for one agent:
  `runtime.options` goes to `ClaudeSDKClient`, and `async with runtime:` (or `await
  runtime.close()`) releases the agent's locks and tells the monitor when the agent ends, for
  whatever reason.
- `LockCoordinator(repo)`: one lock store and one deadlock monitor shared by N agents, with
  the monitor's cycle check wired to the store. An orchestrator needs only:

      async with LockCoordinator(repo) as coordinator:      # closes every agent on exit
          async with coordinator.runtime("agent-1") as rt, ClaudeSDKClient(rt.options) as c:
              await c.query(task)

  With `cross_process=True` its agents also heed the victim notices posted for deadlocks that
  cross processes (e.g. with `lockyard serve` agents), and while it is open the coordinator
  stands in the election of the process that finds those (`crossproc/election.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ..core.deadlock_info import DeadlockInfo
from ..core.events import LockEvent, LockEventType
from ..core.extras import SDK, require
from ..core.ports import EmitLockEvent, VictimNotices, deliver
from ..domain.monitor import DeadlockMonitor, OnDeadlock
from ..domain.victim import VictimPolicy
from ..prompts.loader import render_implementer_prompt
from .crossproc.cycle_check import cycle_stands, holder_in_store
from .crossproc.election import DeadlockDuty
from .crossproc.idle_policy import Revocation, revoke_stalls
from .crossproc.notices import AnyVictimNotices
from .crossproc.sources import victim_notices_for
from .crossproc.state import WaitForSnapshot
from .hooks.commit_guard.hook import BASH_MATCHER, make_commit_guard_hook
from .hooks.lock_events import make_lock_event_hook
from .hooks.read_note.hook import READ_NOTE_MATCHER, make_read_note_hook
from .hooks.shell_guard.decide import DEFAULT_POLICY, ShellGuardPolicy
from .hooks.shell_guard.hook import make_shell_guard_hook
from .hooks.write_guard.hook import WRITE_TOOLS_MATCHER, make_write_guard_hook
from .lockstore import LockBackend, LockStore, open_backend, snapshot_of_namespace
from .seen.stale import forget
from .tools.lock_tools import LockTools
from .tools.naming import (
    DEFAULT_SERVER_KEY,
    acquire_tool_name,
    release_tool_name,
    status_tool_name,
)
from .transports.sdk.server import lock_tools_server_config
from .transports.sdk.servers import new_agent_id

if TYPE_CHECKING:
    # Only `build()` needs the SDK at run time (the options it makes are the SDK's): the
    # coordinator's store and monitor, and the lock tools' server, work without it (the demo).
    from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, McpSdkServerConfig

logger = logging.getLogger(__name__)

PromptMode = Literal["append", "replace", "none"]


class AgentRuntime:
    """One implementer agent's options plus the teardown that leaves no lock behind."""

    def __init__(
        self,
        *,
        agent_id: str,
        options: ClaudeAgentOptions,
        tools: LockTools,
        store: LockBackend,
        monitor: DeadlockMonitor | None,
        server_key: str,
        prompt: str,
    ) -> None:
        self.agent_id = agent_id
        self.options = options
        self.tools = tools
        self.store = store
        self.monitor = monitor
        self.server_key = server_key
        self.prompt = prompt
        self.closed = False

    @property
    def tool_names(self) -> tuple[str, str]:
        """The full names the model calls: (`mcp__<key>__lock_acquire`, `..._release`)."""
        return acquire_tool_name(self.server_key), release_tool_name(self.server_key)

    async def close(self) -> list[str]:
        """Release every lock the agent still holds, tell the monitor, then unregister it.

        Idempotent; shielded, so it completes even when the caller is being cancelled.
        Returns the lock keys released.
        """
        if self.closed:
            return []
        self.closed = True
        with anyio.CancelScope(shield=True):
            released = sorted(self.store.cleanup_agent_locks(self.agent_id))
            for key in released:
                await self.tools.emit(LockEventType.RELEASED, key)
            if self.monitor is not None:
                self.monitor.unregister_agent(self.agent_id)
            forget(self.store.root, self.agent_id)
        if released:
            logger.info("agent %s ended holding %d lock(s): released", self.agent_id, len(released))
        return released

    async def __aenter__(self) -> AgentRuntime:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


@dataclass
class AgentRuntimeBuilder:
    """Builds the `ClaudeAgentOptions` of one implementer agent.

    What it adds to `base_options` (which it never mutates):
    - `mcp_servers[server_key]`: the lock tools for this agent;
    - `allowed_tools`: `mcp__<server_key>__lock_acquire` and `..._release`;
    - PreToolUse hooks: the read note (Read|Bash: what the agent sees of each file), the write
      guard (Write|Edit|MultiEdit|NotebookEdit), the shell guard (Bash: files a command writes
      must be locked) and the `git commit` guard (Bash); the three guards refuse a write to a
      file changed since the agent read it (`lockyard.infra.seen`);
    - PostToolUse and PostToolUseFailure hooks on the two lock tools: lock events;
    - the implementer prompt (appended to the Claude Code preset by default);
    - `cwd` = the repository, unless set.
    Events go to `monitor.handle_event` and to `emit_lock_event` (both if both are given);
    victim notices come from `victim_notices`, else from the monitor.
    """

    repo_path: str | os.PathLike[str]
    agent_id: str | None = None
    store: LockBackend | None = None
    lock_dir: str | os.PathLike[str] | None = None
    backend: str | None = None
    """`postgresql://...` or a lock directory (see `open_backend`); default LOCKYARD_BACKEND."""
    namespace: str | None = None
    """The repository's explicit name (see `LockStore`); only without `store`."""
    monitor: DeadlockMonitor | None = None
    emit_lock_event: EmitLockEvent | None = None
    victim_notices: VictimNotices | None = None
    issue_id: str | None = None
    server_key: str = DEFAULT_SERVER_KEY
    base_options: ClaudeAgentOptions | None = None
    """What the agent's options start from (never mutated); None: `ClaudeAgentOptions()`."""
    prompt_mode: PromptMode = "append"
    guard_writes: bool = True
    guard_commits: bool = True
    guard_shell: bool = True
    shell_policy: ShellGuardPolicy = DEFAULT_POLICY
    """What the shell guard does with commands whose write targets it cannot read."""
    tool_timeout_seconds: float | None = None
    """The CLI's wall-clock limit per lock tool call (server `timeout`); None: CLI default."""

    def build(self) -> AgentRuntime:
        sdk = require(SDK, "AgentRuntimeBuilder (an agent's ClaudeAgentOptions)")
        base: ClaudeAgentOptions = (
            self.base_options if self.base_options is not None else sdk.ClaudeAgentOptions()
        )
        agent_id = self.agent_id if self.agent_id is not None else new_agent_id()
        if self.store is not None and (
            self.lock_dir is not None or self.backend is not None or self.namespace is not None
        ):
            raise ValueError(
                "pass either store= or lock_dir=/backend=/namespace=, not both: the store has "
                "its own"
            )
        store = (
            self.store
            if self.store is not None
            else open_backend(
                self.repo_path, self.backend, lock_dir=self.lock_dir, namespace=self.namespace
            )
        )
        if self.tool_timeout_seconds is not None and not self.tool_timeout_seconds > 0:
            raise ValueError("tool_timeout_seconds must be a positive number of seconds")
        acquire, release = acquire_tool_name(self.server_key), release_tool_name(self.server_key)
        emit = _fan_out(self.monitor, self.emit_lock_event)
        notices = self.victim_notices if self.victim_notices is not None else self.monitor
        tools = LockTools(store, agent_id, emit_lock_event=emit, victim_notices=notices)
        prompt = render_implementer_prompt(
            agent_id=agent_id,
            repo=store.root,
            lock_dir=store.location,
            acquire_tool=acquire,
            release_tool=release,
        )
        options = dataclasses.replace(
            base,
            mcp_servers=self._servers(base, tools),
            allowed_tools=_merged(
                base.allowed_tools, [acquire, release, status_tool_name(self.server_key)]
            ),
            hooks=self._hooks(base, sdk.HookMatcher, store, agent_id, emit, acquire, release),
            system_prompt=self._system_prompt(base, prompt),
            cwd=base.cwd if base.cwd is not None else store.root,
        )
        if self.monitor is not None:
            self.monitor.register_agent(agent_id, self.issue_id)
        return AgentRuntime(
            agent_id=agent_id,
            options=options,
            tools=tools,
            store=store,
            monitor=self.monitor,
            server_key=self.server_key,
            prompt=prompt,
        )

    def _servers(self, base: ClaudeAgentOptions, tools: LockTools) -> dict[str, Any]:
        existing = base.mcp_servers
        if not isinstance(existing, dict):
            raise ValueError(
                "base_options.mcp_servers must be a dict to add the lockyard server to it "
                "(not a path or JSON string)"
            )
        if self.server_key in existing:
            raise ValueError(
                f"base_options.mcp_servers already has a server under {self.server_key!r}: "
                "choose another server_key"
            )
        config: McpSdkServerConfig = lock_tools_server_config(tools, self.server_key)
        entry: dict[str, Any] = dict(config)
        if self.tool_timeout_seconds is not None:
            entry["timeout"] = round(self.tool_timeout_seconds * 1000)  # forwarded to the CLI
        return {**existing, self.server_key: entry}

    def _hooks(
        self,
        base: ClaudeAgentOptions,
        matcher: type[HookMatcher],
        store: LockBackend,
        agent_id: str,
        emit: EmitLockEvent,
        acquire: str,
        release: str,
    ) -> dict[Any, list[HookMatcher]]:
        hooks: dict[Any, list[HookMatcher]] = {
            event: list(matchers) for event, matchers in (base.hooks or {}).items()
        }
        pre: list[HookMatcher] = []
        if self.guard_writes or self.guard_shell or self.guard_commits:
            # What the agent reads, so the guards below refuse writes made from stale reads.
            note = make_read_note_hook(store, agent_id)
            pre.append(matcher(matcher=READ_NOTE_MATCHER, hooks=[note]))
        if self.guard_writes:
            guard = make_write_guard_hook(store, agent_id, self.server_key)
            pre.append(matcher(matcher=WRITE_TOOLS_MATCHER, hooks=[guard]))
        bash: list[Any] = []
        if self.guard_shell:
            bash.append(
                make_shell_guard_hook(store, agent_id, self.server_key, policy=self.shell_policy)
            )
        if self.guard_commits:
            bash.append(make_commit_guard_hook(store, agent_id, self.server_key))
        if bash:
            pre.append(matcher(matcher=BASH_MATCHER, hooks=bash))
        if pre:
            hooks.setdefault("PreToolUse", []).extend(pre)
        events = make_lock_event_hook(
            emit, self.server_key, agent_id=agent_id, canonicalize=store.canonicalize
        )
        # An exact-name list: a bare prefix like "mcp__lockyard__" would match nothing.
        ours = f"{acquire}|{release}"
        for event_name in ("PostToolUse", "PostToolUseFailure"):
            hooks.setdefault(event_name, []).append(matcher(matcher=ours, hooks=[events]))
        return hooks

    def _system_prompt(self, options: ClaudeAgentOptions, prompt: str) -> Any:
        base = options.system_prompt
        if self.prompt_mode == "none":
            return base
        if self.prompt_mode == "replace" or not base:
            if self.prompt_mode == "replace":
                return prompt
            return {"type": "preset", "preset": "claude_code", "append": prompt}
        if isinstance(base, str):
            return f"{base}\n\n{prompt}"
        config: dict[str, Any] = dict(base)
        if config.get("type") == "preset":
            config["append"] = "\n\n".join(p for p in (config.get("append"), prompt) if p)
            return config
        if config.get("type") == "custom":
            config["prompt"] = f"{config['prompt']}\n\n{prompt}"
            return config
        raise ValueError(
            f"cannot append the implementer prompt to a {config.get('type')!r} system prompt: "
            "use prompt_mode='replace' or 'none' and include runtime.prompt yourself"
        )


def _merged(first: Sequence[str], extra: Sequence[str]) -> list[str]:
    return list(dict.fromkeys([*first, *extra]))


def _fan_out(monitor: DeadlockMonitor | None, emit: EmitLockEvent | None) -> EmitLockEvent:
    async def emit_all(event: LockEvent) -> None:
        if monitor is not None:
            await monitor.handle_event(event)
        await deliver(emit, event)

    return emit_all


class AgentAlreadyOpenError(ValueError):
    """`LockCoordinator.runtime(agent_id)` while a runtime of that agent id is still open.

    Two runtimes of one agent id would share every lock (locks belong to the agent id), so
    one's `lock_release {"all": true}` would release the other's files under it.
    """


class CoordinatorNotOpenError(RuntimeError):
    """`LockCoordinator.runtime()` with an `on_deadlock` callback before `async with`: the
    callback runs in the coordinator's own task group, which exists only while it is open."""


class LockCoordinator:
    """One lock store and one deadlock monitor for a repository, shared by every agent.

    The monitor re-checks each cycle against the store before acting (`verify_cycle`): every
    hold in the cycle must still be held by that agent; a hold the store no longer has is
    corrected in the monitor from the store (`holder_in_store`). Wait edges are the tools'
    own (they end with WAIT_ENDED the moment a wait ends), so they are trusted as reported.

    While open (`async with`), the coordinator runs in a task group of its own: the
    `on_deadlock` callbacks (never inside an agent's tool call; errors are logged), and a
    re-sync of the monitor with the store every `resync_interval` seconds (rebuild from the
    store's holds and its agents' queued waits, then `check_all`), which catches what events
    missed (a lock removed by `lockyard clean`, a hold taken outside the tools).

    The in-process monitor sees only this coordinator's agents. With `cross_process=True`, a
    waiting agent also heeds the victim notices posted for the whole lock store, and while
    open the coordinator stands in the election of the one process (of every `lockyard
    serve`, coordinator and monitor on the store) that finds deadlocks across processes, so a
    deadlock with agents of other processes (`lockyard serve`, other coordinators) ends as
    soon as that leader picks one of ours, with no monitor started by hand.

    `idle_limit` (seconds; off by default): an agent of this coordinator that did nothing for
    that long while another agent waits for one of its locks has every lock revoked (checked
    on each re-sync; `crossproc/idle_policy.py`); its next lock call tells it why. The lock
    directory's own limit (`lockyard policy --idle-limit`) covers every process's agents.
    """

    def __init__(
        self,
        repo_path: str | os.PathLike[str],
        lock_dir: str | os.PathLike[str] | None = None,
        *,
        store: LockBackend | None = None,
        backend: str | None = None,
        namespace: str | None = None,
        on_deadlock: OnDeadlock | None = None,
        victim_policy: VictimPolicy | None = None,
        server_key: str = DEFAULT_SERVER_KEY,
        base_options: ClaudeAgentOptions | None = None,
        cross_process: bool = False,
        resync_interval: float = 2.0,
        idle_limit: float | None = None,
    ) -> None:
        if not resync_interval > 0:
            raise ValueError("resync_interval must be a positive number of seconds")
        if idle_limit is not None and not idle_limit > 0:
            raise ValueError("idle_limit must be a positive number of seconds (None: off)")
        if store is not None and (
            lock_dir is not None or backend is not None or namespace is not None
        ):
            raise ValueError(
                "pass either store= or lock_dir=/backend=/namespace=, not both: the store has "
                "its own"
            )
        self.repo_path = repo_path
        self.store: LockBackend = (
            store
            if store is not None
            else open_backend(repo_path, backend, lock_dir=lock_dir, namespace=namespace)
        )
        # A store opened here on a database is closed by `aclose` (its session would hold a
        # server connection until garbage collection); a lock directory holds nothing that
        # needs it and stays readable afterwards; a store passed in is the caller's to close.
        self._closes_store = store is None and not isinstance(self.store, LockStore)
        self.monitor = DeadlockMonitor(
            on_deadlock,
            victim_policy=victim_policy,
            verify_cycle=self.verify_cycle,
            holder_in_store=self.holder_in_store,
        )
        self.resync_interval = resync_interval
        self.idle_limit = idle_limit
        self._background: contextlib.AsyncExitStack | None = None
        self._duty: DeadlockDuty | None = None
        self.server_key = server_key
        self.base_options = base_options
        self.cross_process = cross_process
        self.victim_notices: VictimNotices = self.monitor
        """Where every agent's waiting `lock_acquire` hears that it was chosen as a victim."""
        if cross_process:
            shared = victim_notices_for(self.store)
            self.victim_notices = AnyVictimNotices(self.monitor, shared)
        self._runtimes: list[AgentRuntime] = []

    def verify_cycle(self, info: DeadlockInfo) -> bool:
        """Whether every hold of the cycle is still real in the lock store, readers' shared
        holds and directories' included (`crossproc/cycle_check.py`)."""
        return cycle_stands(self.store, info)

    def holder_in_store(self, lock_path: str) -> str | None:
        """The store's holder of `lock_path` (or of a reader's node); LookupError when its
        record is unreadable."""
        return holder_in_store(self.store, lock_path)

    async def resync(self) -> list[DeadlockInfo]:
        """Rebuild the monitor from the store (every hold; the queued waits of the agents it
        knows, so agents of other processes are left to `lockyard monitor`), then report
        every deadlock found. Returns the reports. Only the store's own namespace: the
        monitor keys locks by repository-relative key, which other repositories sharing the
        lock directory use for their own locks."""
        known = {info.agent_id for info in self.monitor.snapshot().agents}
        truth = snapshot_of_namespace(self.store.snapshot(), self.store.namespace)
        waits = [(agent, lock) for agent, lock in truth.waits if agent in known]
        self.monitor.rebuild(truth.holds, waits)
        return await self.monitor.check_all()

    def revoke_idle(self) -> list[Revocation]:
        """Apply `idle_limit` to this coordinator's agents: revoke the locks of each one idle
        past it while another agent (of any process) waits for one of them; it is told on its
        next lock call. The store's own limit (`lockyard policy`) is the deadlock leader's."""
        if self.idle_limit is None:
            return []
        mine = {runtime.agent_id for runtime in self._runtimes if not runtime.closed}
        if not mine:
            return []
        snapshot = WaitForSnapshot.from_store_snapshot(self.store.snapshot())
        return revoke_stalls(
            self.store, snapshot, self.idle_limit, time.time(), whose="its coordinator's",
            among=mine,
        )  # fmt: skip

    async def _resync_forever(self) -> None:
        while True:
            await anyio.sleep(self.resync_interval)
            try:
                self.revoke_idle()
                await self.resync()
            except Exception:  # the next pass tries again; events keep the monitor going
                logger.exception("re-sync of the deadlock monitor with the lock store failed")

    def builder(self, agent_id: str | None = None, **settings: Any) -> AgentRuntimeBuilder:
        """A builder on the shared store, monitor and victim notices; `settings` override
        builder fields. Runtimes it builds are not tracked: `runtime()` is the usual way."""
        settings.setdefault("server_key", self.server_key)
        settings.setdefault("base_options", self.base_options)
        settings.setdefault("victim_notices", self.victim_notices)
        return AgentRuntimeBuilder(
            self.repo_path, agent_id=agent_id, store=self.store, monitor=self.monitor, **settings
        )

    def runtime(self, agent_id: str | None = None, **settings: Any) -> AgentRuntime:
        """Build one agent's runtime (see `AgentRuntimeBuilder` for `settings`).

        Raises `AgentAlreadyOpenError` if `agent_id` already has a runtime here that is not
        closed: close it first, or give the new agent its own id.
        """
        if self.monitor.on_deadlock is not None and self._background is None:
            raise CoordinatorNotOpenError(
                "open the coordinator before building runtimes: `async with "
                "LockCoordinator(...) as coordinator:`; it runs on_deadlock in a task group of "
                "its own, never inside an agent's tool call"
            )
        self._runtimes = [r for r in self._runtimes if not r.closed]
        if agent_id is not None and any(r.agent_id == agent_id for r in self._runtimes):
            raise AgentAlreadyOpenError(
                f"agent {agent_id!r} already has an open runtime in this coordinator; two "
                "runtimes of one agent id would share (and release) each other's locks. Close "
                "the first (`await runtime.close()` or leave its `async with`), or use another "
                "agent id"
            )
        runtime = self.builder(agent_id, **settings).build()
        self._runtimes.append(runtime)
        return runtime

    async def aclose(self) -> dict[str, list[str]]:
        """Close every runtime still open (agent id -> locks released), then the store if
        this coordinator opened it on a database; safe to repeat."""
        open_runtimes, self._runtimes = self._runtimes, []
        released = {runtime.agent_id: await runtime.close() for runtime in open_runtimes}
        duty, self._duty = self._duty, None
        if duty is not None:  # resigns (in its own thread) before the store closes
            await anyio.to_thread.run_sync(duty.stop)
        if self._closes_store:
            self.store.close()
        return released

    async def __aenter__(self) -> LockCoordinator:
        if self._background is not None:
            raise RuntimeError("this LockCoordinator is already open")
        async with contextlib.AsyncExitStack() as stack:
            group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(group.cancel_scope.cancel)  # runs first on exit: stop the loops
            await group.start(self.monitor.run_callbacks)
            group.start_soon(self._resync_forever)
            if self.cross_process:
                self._duty = DeadlockDuty(self.store, role="a LockCoordinator").start()
            self._background = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            await self.aclose()
        finally:
            background, self._background = self._background, None
            if background is not None:
                await background.aclose()

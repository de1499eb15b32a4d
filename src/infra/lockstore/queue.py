"""One waiter's place in a lock's FIFO queue, and what it watches while it waits.

The recipe of etcd's mutex and ZooKeeper's lock: each waiter adds an entry named by a ticket
(one more than the highest in the queue, claimed by exclusive creation, so names sort in
arrival order whatever any process's clock says) to `<name>.q/`; only the oldest live
entry may take the lock; every other waiter watches only its predecessor's entry, so a
release wakes one waiter, not all. Entries record agent and process, so queued waits are
visible on disk (`lockyard status`, the cross-process monitor) and entries of dead waiters
are recognised and dropped.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import TYPE_CHECKING

from .errors import LockDirFullError
from .liveness import Liveness, current_process, new_token, pids_are_local
from .lockdir import QUEUE_SUFFIX, LockDir
from .records import HolderRecord, WaiterRecord, encode_waiter
from .wakeup import WakeHub, Waker

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from .store import LockStore


class Wait:
    """A queued wait for one lock: enqueue on enter, leave the queue on exit (always)."""

    def __init__(
        self,
        *,
        store: LockStore,
        directory: LockDir,
        hub: WakeHub,
        name: str,
        key: str,
        agent: str,
        push: bool,
        poll_interval: float,
    ) -> None:
        self._store = store
        self._dir = directory
        self._hub = hub
        self._name = name
        self._key = key
        self._agent = agent
        self._push_wanted = push
        self._poll_interval = poll_interval
        self._queue_dir = f"{directory.path}/{name}{QUEUE_SUFFIX}"
        self._watched: set[str] = set()  # directories whose inotify events we need now
        self._pushed = False
        self._pids: set[int] = set()
        self._topics: set[str] = set()
        self.waker = Waker()
        self.entry = ""
        self._token = ""  # tells our entry from a later one with the same (reused) ticket
        self.interval = poll_interval
        self._at_head = False
        self._told_full = False

    def __enter__(self) -> Wait:
        try:
            self._enqueue()
            if self._push_wanted and self._hub.push_available:
                # Pushed: re-check on our own only as a backstop (lost events, no pidfds).
                self._pushed = True
                self.interval = max(self._poll_interval, self._store.liveness_interval)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # Synchronous on purpose: it runs to the end even when the waiting task is cancelled.
        if self.entry:
            self._store.drop_waiter(self._name, self.entry, self._token)
            self.entry = ""
        for topic in self._topics:
            self._hub.unsubscribe(topic, self.waker)
        self._topics.clear()
        for pid in self._pids:
            self._hub.unwatch_process(pid)
        self._pids.clear()
        for directory in self._watched:
            self._hub.unwatch(directory)
        self._watched.clear()
        self.waker.close()

    def _watch_only(self, directories: set[str]) -> bool:
        """Have inotify report the events of exactly `directories` (where other processes
        can end our wait); True when that changed. A directory that cannot be watched
        (gone, or out of watches) turns push off: we poll instead."""
        if directories == self._watched:
            return False
        for directory in self._watched - directories:
            self._unwatch(directory)
        for directory in directories - self._watched:
            if not self._hub.watch(directory):
                self._pushed = False
                self.interval = self._poll_interval
                break
            self._watched.add(directory)
        return True

    def _unwatch(self, directory: str) -> None:
        self._watched.discard(directory)
        self._hub.unwatch(directory)

    def _enqueue(self) -> None:
        token = new_token()
        me = current_process()
        namespace, checkout = self._store.namespace, self._store.root

        def record_for(ticket: int) -> str:
            return encode_waiter(me, self._agent, token, ticket, self._key, namespace, checkout)

        self.entry = self._dir.enqueue(self._name, record_for)
        self._token = token

    def advance(self) -> bool:
        """Take the lock if it is our turn; else subscribe to what ends our wait. True: ours."""
        while True:
            self.waker.clear()
            step = self._step()
            if step is None:
                return True
            topics, directories = step
            topics = self._follow_exits(topics)
            watches_changed = self._pushed and self._watch_only(directories)
            if topics == self._topics and not watches_changed:
                return False
            # Subscribe first, then look again: a change in between wakes the waker.
            for topic in self._topics - topics:
                self._hub.unsubscribe(topic, self.waker)
            for topic in topics - self._topics:
                self._hub.subscribe(topic, self.waker)
            self._topics = topics

    def _follow_exits(self, topics: set[str]) -> set[str]:
        """Watch the processes named by `pid:` topics; drop those that cannot be watched."""
        wanted = {int(topic[4:]) for topic in topics if topic.startswith("pid:")}
        for pid in self._pids - wanted:
            self._hub.unwatch_process(pid)
        for pid in wanted - self._pids:
            if not self._hub.watch_process(pid):
                topics.discard(f"pid:{pid}")
                wanted.discard(pid)
        self._pids = wanted
        return topics

    @staticmethod
    def _is_ours(record: HolderRecord | WaiterRecord) -> bool:
        me = current_process()
        return record.pid == me.pid and record.start_time == me.start_time

    def _exit_topic(self, record: HolderRecord | WaiterRecord | None) -> set[str]:
        """`pid:<pid>` for a live process of this machine other than ours, to hear of its end."""
        if not self._pushed or record is None or not pids_are_local():
            # (Recorded pids are /proc's numbers; where those are not ours, as in a pid
            # namespace whose /proc was not remounted, pidfd_open would name another process.)
            return set()
        if self._is_ours(record):
            return set()
        if record.liveness()[0] is not Liveness.ALIVE:
            return set()
        return {f"pid:{record.pid}"}

    def _step(self) -> tuple[set[str], set[str]] | None:
        """None: the lock is ours. Else the topics that end our wait, and the directories
        whose inotify events we need to hear of them from other processes."""
        # Once at the head we stay there (later arrivals queue behind us): instead of reading
        # the queue again, only check that our entry is still there (and still ours: an
        # operator or a successor may have ended our wait, and its ticket been reused).
        if self._at_head and not self._store.owns_entry(self._name, self.entry, self._token):
            self._at_head = False
        if not self._at_head:
            ahead = self._predecessor()
            if ahead is not None:
                entry, record = ahead
                if not entry:
                    return set(), {self._queue_dir}
                topics = {f"{self._queue_dir}/{entry}"} | self._exit_topic(record)
                return topics, {self._queue_dir}
            self._at_head = True
        if self._take_if_space():
            self._store.drop_waiter(self._name, self.entry, self._token)
            self.entry = ""
            return None
        holder = self._store.current_holder(self._name)
        topics = {self._store.lock_topic(self._name)} | self._exit_topic(holder)
        # A holder in this process notifies us itself when it releases; watching the lock
        # directory then would only wake the inotify reader thread at every lock operation,
        # which takes the GIL from the handoff (a third of its latency). Another process
        # removing that holder's lock (`lockyard clean`) is seen by the backstop re-check.
        if holder is not None and self._is_ours(holder):
            return topics, set()
        return topics, {self._dir.path}

    def _take_if_space(self) -> bool:
        """Our turn: take the lock. A full lock directory cannot hold the grant's record:
        keep our place and try again at the next wake-up or backstop re-check, when space
        may have been freed (releases need none), rather than end the wait with an error."""
        try:
            taken = self._store.take(self._name, self._key, self._agent, respect_queue=False)
        except LockDirFullError as full:
            if not self._told_full:
                self._told_full = True
                log.warning("agent %s keeps waiting for %s: %s", self._agent, self._key, full)
            return False
        self._told_full = False
        return taken

    def _predecessor(self) -> tuple[str, WaiterRecord | None] | None:
        """The live entry just ahead of ours and its record; None: we are the head;
        ("", None): our entry had vanished and we queued again."""
        predecessor = None
        for entry, record in self._store.read_queue(self._name):
            if entry == self.entry and record.token == self._token:
                return predecessor
            if not self._is_ours(record) and record.liveness()[0] is Liveness.DEAD:
                self._store.drop_waiter(self._name, entry)
                continue
            if predecessor is None and self._store.turn_expired(self._name, entry):
                self._store.pass_over(self._name, entry, record)  # stopped or stuck
                continue
            predecessor = (entry, record)
        # Our entry was removed under us (passed over, ended by `lockyard clean`, the lock dir
        # wiped): queue again, at the back.
        self._enqueue()
        if self._queue_dir in self._watched:
            self._unwatch(self._queue_dir)  # the directory may be a new one: watch it anew
        return "", None

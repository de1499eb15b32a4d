"""The wait queues of a lock directory, and one waiter's place in line.

A queue is `<name>.q/`, its entries named by tickets in arrival order (see `lockdir.py`); an
entry's record names the waiting agent and process, so queued waits are visible on disk
(`lockyard status`, the cross-process monitor) and dead waiters are recognised. The rules
that decide who may take a lock are in `protocol.py`; this module reads and writes entries.

Every operation a waiter repeats costs O(1) whatever the queue's length: a `Place` lists the
entries ahead of it once, when it queues, and afterwards reads only its own entry and its
predecessor's. Only rare events read a whole queue (an operator's `end_waits`, a waiter that
leaves without knowing whether it is first, a release whose holder did not come from the
queue).
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Final, NamedTuple

from ..errors import CorruptRecordError
from ..liveness import Liveness, ProcessIdentity, current_process, new_token
from ..records import HolderRecord, WaiterRecord, decode_waiter
from .disk import LOCK_SUFFIX, QUEUE_SUFFIX, TICKET_DIGITS, LockDir
from .protocol import Seen, judge_predecessor, turn_is_over
from .wake_hub import process_hub

log = logging.getLogger(__name__)

FIRST_TICKET: Final = f"{1:0{TICKET_DIGITS}d}"
"""The lowest ticket: when its entry exists it is first (nothing sorts ahead of it, and a
queue that empties numbers from it again), so a short queue's head is found in one read."""


def is_ours(record: HolderRecord | WaiterRecord) -> bool:
    """Whether `record` names this very process (no need to ask /proc whether it lives)."""
    me = current_process()
    return record.pid == me.pid and record.start_time == me.start_time


def provably_dead(record: WaiterRecord) -> bool:
    return not is_ours(record) and record.liveness()[0] is Liveness.DEAD


class Queues:
    """The queues of one lock directory: read them, leave them, stamp and judge turns."""

    def __init__(self, directory: LockDir, *, turn_timeout: float) -> None:
        self._dir = directory
        self.turn_timeout = turn_timeout
        self.on_pass_over: Callable[[WaiterRecord], None] | None = None
        """Told of each waiter passed over here (the store journals it)."""
        self._next_first: dict[str, tuple[str, str, Head | None]] = {}
        """lock name -> (entry, record text, the waiter when known without decoding the
        text) of a waiter known here to be first (it queued with nobody ahead, or the
        previous head stamped it when it left): the entry a release must stamp, found in
        O(1)."""

    def entry_topic(self, name: str, entry: str) -> str:
        return f"{self.queue_dir(name)}/{entry}"

    def queue_dir(self, name: str) -> str:
        return f"{self._dir.path}/{name}{QUEUE_SUFFIX}"

    # -- reading -------------------------------------------------------------------------

    def record(self, name: str, entry: str) -> WaiterRecord | None:
        """The record of one entry; None when it is gone or not a record a store wrote."""
        text = self._dir.queue_record(name, entry)
        if text is None:
            return None
        try:
            return decode_waiter(text, f"{name}{QUEUE_SUFFIX}/{entry}")
        except CorruptRecordError:
            return None

    def owns_entry(self, name: str, entry: str, token: str) -> bool:
        """Whether queue entry `entry` of `name` exists and is the wait with `token`."""
        record = self.record(name, entry)
        return record is not None and record.token == token

    def turn_age(self, name: str, entry: str) -> float | None:
        """How long ago `entry` got its turn (or queued); None when it is gone."""
        started = self._dir.turn_started(name, entry)
        return None if started is None else time.time() - started

    def lock_is_free(self, name: str) -> bool:
        return not self._dir.exists(name + LOCK_SUFFIX)

    def turn_expired(self, name: str, entry: str, token: str | None = None) -> bool:
        """True when waiter `entry` has had its turn at lock `name` for longer than
        `turn_timeout` without taking it: the lock is free, or holds the grant a release
        handed over to that waiter (its `token`), which the waiter has not accepted."""
        age = self.turn_age(name, entry)
        if age is None or age < self.turn_timeout:
            return False
        return self.lock_is_free(name) or (token is not None and self._dir.holds(name, token))

    def reserved(self, name: str) -> bool:
        """Whether a waiter has the turn of free lock `name` (so `try_lock` must not take
        it); drops dead and stalled first entries on the way. Reads records only up to the
        first live waiter."""
        if not self._dir.exists(name + QUEUE_SUFFIX):
            return False
        for entry in self._dir.queue_order(name, strict=True):
            record = self.record(name, entry)
            if record is None:
                continue  # left meanwhile, or not a waiter's record: never obeyed
            if provably_dead(record):
                self.end_wait(name, entry, record)
                continue
            if self.turn_expired(name, entry):
                self.pass_over(name, entry, record)
                continue
            return True
        return False

    # -- leaving and turns ---------------------------------------------------------------

    def drop(self, name: str, entry: str, token: str | None = None) -> bool:
        """Remove a queue entry and wake whoever watches it (its successor); True when this
        call removed it. With `token`, only while the entry is still that waiter's: tickets
        are reused once a queue empties, so a waiter whose entry was ended by others must not
        remove a newcomer's."""
        if token is not None and not self.owns_entry(name, entry, token):
            return False
        order = self._dir.queue_order(name)
        if order and order[0] == entry and len(order) > 1:
            self._dir.stamp_turn(name, order[1])  # the first leaves: its successor's turn
        return self._remove(name, entry)

    def leave_as_head(self, name: str, entry: str, ticket: int, *, holding: bool) -> bool:
        """Remove our entry, which is the first (we are the head): stamp our successor's turn
        first. The successor is usually the next ticket, found in O(1). A gap (a waiter that
        left behind us) costs a listing, except when we leave `holding` the lock: then no
        turn starts now (the release stamps the first entry), and a successor that was not
        told it is first finds out by looking at the entries ahead of it."""
        successor = _ticket_name(ticket + 1)
        # Mostly nobody queues behind us: a look that cannot fail costs less than a read
        # that fails.
        queued = self._dir.queued(name, successor)
        text = self._dir.queue_record(name, successor) if queued else None
        if text is None and not holding:
            after = [other for other in self._dir.queue_order(name) if other > entry]
            successor = after[0] if after else ""
            text = self._dir.queue_record(name, successor) if successor else None
        if successor and text is not None:
            self._dir.stamp_turn(name, successor)
            self.note_first(name, successor, text)
        elif self._next_first.get(name, ("",))[0] == entry:
            # It named us (we queued first): a release here would read our old entry in vain.
            self._next_first.pop(name, None)
        return self._remove(name, entry)

    def note_first(self, name: str, entry: str, text: str, head: Head | None = None) -> None:
        """Remember `entry` (holding `text`; `head`: its waiter, when known) as the first
        entry of its queue, for the release to stamp (see `start_turn_at_release`)."""
        self._next_first[name] = (entry, text, head)

    def start_turn_at_release(self, name: str) -> tuple[str, Head] | None:
        """Stamp the first waiter's turn and return its entry and itself (None: nobody
        queues, or the first entry is no waiter's record). A release does so before the lock
        goes or is handed over, so no one sees the lock free, or granted to that waiter,
        while its turn looks old."""
        known = self._next_first.pop(name, None)
        first: tuple[str, Head] | None = None
        if known is not None:
            entry, text, head = known
            if head is not None and head.here:
                # A waiter of this process: the stamp itself tells that its entry is still
                # there. Should the entry be another's (ours ended, and its ticket taken
                # again in a new queue), handing over to our waiter is no harm: its
                # acceptance reads its entry, so it passes the grant on instead (to the
                # first, whose turn this stamp started).
                if self._dir.stamp_turn(name, entry):
                    return entry, head
            # The same record (its token is unique) means the entry stayed all along, so it
            # is still first: no entry can appear ahead of an existing one.
            elif self._dir.queue_record(name, entry) == text:
                head = head_of(text)
                first = None if head is None else (entry, head)
        if first is None:
            first = self.first_waiter(name)
        if first is None:
            return None
        entry, head = first
        if not head.here:
            # Rung at once: it wakes while we stamp its turn and hand the lock over (our
            # grant is gone already: should it look before the handover, it finds the lock
            # empty and publishes its staged grant itself).
            self._dir.ring(name, head.token)
        self._dir.stamp_turn(name, entry)
        return entry, head

    def pass_over(self, name: str, entry: str, record: WaiterRecord) -> bool:
        """Drop the queue entry of a first waiter that did not take its turn in time (and
        the grant handed over to it, if it never accepted it); True when this call did.

        If its process resumes, it finds its entry gone and queues again at the back.
        """
        if not self.end_wait(name, entry, record):
            return False
        log.warning(
            "passed over waiter %s (pid %d) on %s: it did not take its turn at the lock for "
            "over %gs",
            record.agent_id,
            record.pid,
            record.lock_path,
            self.turn_timeout,
        )
        if self.on_pass_over is not None:
            self.on_pass_over(record)
        return True

    def pass_over_unaccepted(self, name: str, token: str) -> bool:
        """Pass over the first waiter when lock `name` holds grant `token`, handed over to
        it at a release and left unaccepted past its turn; True when it was."""
        for entry in self._dir.queue_order(name):
            record = self.record(name, entry)
            if record is None:
                continue
            if record.token != token or not self.turn_expired(name, entry, token):
                return False
            return self.pass_over(name, entry, record)
        return False

    def end_wait(self, name: str, entry: str, record: WaiterRecord) -> bool:
        """Drop the entry of a waiter that will not take its turn (dead, stalled), and take
        back a grant handed over to it at a release that it never accepted (accepting is
        removing its own entry, which this removal forestalls: exactly one of the two
        removals succeeds). True when this call removed the entry."""
        if not self.drop(name, entry):
            return False
        if self._dir.holds(name, record.token):
            self.release(name, record.token)
        return True

    def open_doorbell(self, name: str, token: str) -> int | None:
        return self._dir.open_doorbell(name, token)

    def close_doorbell(self, name: str, token: str, fd: int) -> None:
        self._dir.close_doorbell(name, token, fd)

    def withdraw(self, name: str, token: str) -> bool:
        """Take back the grant a waiter staged under `token`; True when a release handed it
        over first (the waiter holds the lock, and must release it)."""
        return self._dir.withdraw(name, token)

    def release(self, name: str, token: str) -> bool:
        """Release grant `token` of lock `name`; False, touching nothing, when it is not the
        current grant. The grant goes first (its removal by token decides), then the queue
        is looked at: when a waiter queues, the first one's turn is stamped and the lock is
        handed over to it (the grant it staged, published in place of ours), else the lock
        goes; either way whoever waits on the lock in this process is woken (other
        processes hear of it through their doorbell, or the lock directory's events).

        Between the two the lock is an empty directory: held by nobody, so a waiter that
        queues after our look finds it free (or gone) and takes it itself, with no need to
        be rung; and not gone, so nobody judges the first waiter's turn over (a free lock)
        before it is stamped."""
        if not self._dir.drop_grant(name, token):
            return False
        first = self.start_turn_at_release(name)
        head = None if first is None else first[1]
        if head is None:
            self._dir.free(name)
            handed = False
        elif head.here:
            # A head in this process accepts at once, leaving the queue as its own look
            # would: woken by the notify below, it returns without a system call.
            handed = self._dir.hand_over(name, head.token, accept=process_hub().hand_grant)
        else:
            # A head elsewhere was rung when it was found (`start_turn_at_release`), after
            # our grant went: whenever it looks, it finds its grant or the lock empty (and
            # takes it itself), never held, so it needs no second ring.
            handed = self._dir.hand_over(name, head.token)
        process_hub().notify(f"{self._dir.path}/{name}{LOCK_SUFFIX}")
        if first is not None and not handed:
            # Freed with a queue there: ring whoever is first now. A waiter that became
            # first after we looked (its predecessor left) may have seen our grant and
            # sleeps until rung: its doorbell was open before that look, and the look
            # before our removal. Mostly the head we found is still there, and so still
            # first (no entry appears ahead of an existing one): one read, not a listing,
            # which would cost every handoff O(queue length) whenever the head had not
            # staged its grant yet (a head just woken, in a process that hands the lock
            # on at once).
            if not self._still_queued(name, *first):
                first = self.first_waiter(name)
            if first is not None and not first[1].here:
                self._dir.ring(name, first[1].token)  # this process's waiters heard the notify
        return True

    def _still_queued(self, name: str, entry: str, head: Head) -> bool:
        """Whether queue entry `entry` is still `head`'s (a ticket is taken again only after
        its queue emptied, so the name alone does not say)."""
        text = self._dir.queue_record(name, entry)
        now = None if text is None else head_of(text)
        return now is not None and now.token == head.token

    def first_waiter(self, name: str) -> tuple[str, Head] | None:
        """The first entry of the queue of `name` that holds a waiter's record, and that
        waiter (None: nobody queues)."""
        if not self._dir.exists(name + QUEUE_SUFFIX):
            return None
        text = self._dir.queue_record(name, FIRST_TICKET)
        head = None if text is None else head_of(text)
        if head is not None:
            return FIRST_TICKET, head  # no listing: nothing sorts ahead of the lowest ticket
        for entry in self._dir.queue_order(name):
            text = self._dir.queue_record(name, entry)
            head = None if text is None else head_of(text)
            if head is not None:
                return entry, head
        return None

    def _remove(self, name: str, entry: str) -> bool:
        if not self._dir.dequeue(name, entry):
            return False
        process_hub().notify(self.entry_topic(name, entry))
        return True


class Head(NamedTuple):
    """The first waiter of a queue, as a release needs it."""

    token: str
    """The token of its wait, and of the grant it stages."""
    process: ProcessIdentity | None
    """This process when it waits here (a forked child is another process); else None."""

    @property
    def here(self) -> bool:
        return self.process is not None and self.process is current_process()


def head_of(text: str) -> Head | None:
    """The `Head` in a queue entry's record; None when it is no waiter's record.

    Only the fields a release uses are read, and from the text as the store writes it
    (compact JSON) without decoding the whole record: this runs on every handoff, between
    the release and the waiter's wake-up. A quote inside a JSON string is escaped, so a
    `"token":"` found in the text is the key, not part of a value. Other spellings fall back
    to decoding the JSON. A record that names a token without being a whole waiter's record
    is harmless: a grant is handed over only when a staging of that token exists, which only
    a queued wait makes."""
    token = _text_field(text, '"token":"', '"')
    pid = _text_field(text, '"pid":', ",")
    start_time = _text_field(text, '"start_time":', ",")
    if (
        token is not None
        and pid is not None
        and pid.isdigit()
        and start_time is not None
        and (start_time.isdigit() or start_time == "null")
    ):
        started = None if start_time == "null" else int(start_time)
        return _head(token, int(pid), started)
    try:
        fields = json.loads(text)
    except ValueError:
        return None
    if type(fields) is not dict:
        return None
    return _head(fields.get("token"), fields.get("pid"), fields.get("start_time"))


def _text_field(text: str, mark: str, end: str) -> str | None:
    at = text.find(mark)
    if at < 0:
        return None
    at += len(mark)
    until = text.find(end, at)
    return None if until < 0 else text[at:until]


def _head(token: object, pid: object, start_time: object) -> Head | None:
    if type(token) is not str or not token or "/" in token or "\0" in token or "\\" in token:
        return None  # it names files of the lock directory (and a plain token has no escapes)
    if type(pid) is not int or (start_time is not None and type(start_time) is not int):
        return None
    me = current_process()
    here = pid == me.pid and start_time == me.start_time
    return Head(token, me if here else None)


def _ticket_name(ticket: int) -> str:
    return f"{ticket:0{TICKET_DIGITS}d}"


class Place:
    """One waiter's entry in the queue of lock `name`, and the entries ahead of it.

    The entries ahead are listed once, when the entry is created: none can be added ahead
    of an existing entry, so afterwards each look reads only our entry and the nearest entry
    ahead (popping those that left), O(1) per look.
    """

    def __init__(
        self,
        queues: Queues,
        directory: LockDir,
        name: str,
        record_for: Callable[[int, str], str],
    ) -> None:
        self._queues = queues
        self._dir = directory
        self.name = name
        self._record_for = record_for
        self.entry = ""
        self.ticket = 0
        self.token = ""
        """The token of our wait: in our entry's record, and the token of the grant we stage
        (`LockDir.stage`) for a release to hand over to us."""
        self._text = ""
        self._created: int | None = None
        self._ahead: deque[str] = deque()
        self._decoded: tuple[str, WaiterRecord] | None = None  # the predecessor's, by text

    def join(self) -> None:
        """Queue at the back (again, after our entry was ended by someone else)."""

        token = new_token()  # a new wait each time: queueing again is not the same wait

        def remember(ticket: int) -> str:
            self._text = self._record_for(ticket, token)
            self.ticket = ticket
            return self._text

        self.token = token

        self.entry = self._dir.enqueue(self.name, remember)
        self._created = self._dir.turn_stamp(self.name, self.entry)
        self._ahead = deque(
            other for other in self._dir.queue_order(self.name) if other < self.entry
        )
        if not self._ahead:
            head = Head(token, current_process())
            self._queues.note_first(self.name, self.entry, self._text, head)

    @property
    def at_head(self) -> bool:
        return not self._ahead

    @property
    def predecessor(self) -> str:
        return self._ahead[-1]

    def in_line(self) -> bool:
        """Our entry is still there and still ours (two reads).

        A changed mtime means someone stamped our turn, which happens only to the first
        entry (a release, or the first entry leaving stamps its successor): then every
        entry ahead is gone, known without looking at each of them."""
        if not self.entry:
            return False  # left: passed over while a release handed us the lock
        if self._ahead:
            stamp = self._dir.turn_stamp(self.name, self.entry)
            if stamp is not None and stamp != self._created:
                self._ahead.clear()
        return self._dir.queue_record(self.name, self.entry) == self._text

    def predecessor_record(self) -> WaiterRecord | None:
        """The predecessor's record, None when it is gone (decoded once per record)."""
        text = self._dir.queue_record(self.name, self.predecessor)
        if text is None:
            return None
        if self._decoded is not None and self._decoded[0] == text:
            return self._decoded[1]
        try:
            record = decode_waiter(text, f"{self.name}{QUEUE_SUFFIX}/{self.predecessor}")
        except CorruptRecordError:
            return None  # not a waiter's record: never obeyed
        self._decoded = (text, record)
        return record

    def predecessor_is_first(self) -> bool:
        """Whether no entry is left ahead of the predecessor (amortised O(1): each entry
        ahead is found gone once)."""
        while len(self._ahead) > 1 and not self._dir.exists(
            f"{self.name}{QUEUE_SUFFIX}/{self._ahead[0]}"
        ):
            self._ahead.popleft()
        return len(self._ahead) == 1

    def judge(self, record: WaiterRecord | None, *, dead: bool) -> Seen:
        """What the predecessor is to us, given its record (None: gone) and whether its
        process is provably dead; O(1) reads."""
        if record is None:
            return judge_predecessor(present=False, dead=False, first=False, turn_over=False)
        turn_over = False
        if not dead:
            age = self._queues.turn_age(self.name, self.predecessor)
            turn_over = turn_is_over(
                untaken=age is not None
                and age >= self._queues.turn_timeout  # cheapest first: a young turn ends it
                and (
                    self._queues.lock_is_free(self.name)
                    # or handed over to it at a release, and never accepted
                    or self._dir.holds(self.name, record.token)
                ),
                turn_age=age,
                turn_timeout=self._queues.turn_timeout,
            )
        first = turn_over and self.predecessor_is_first()
        return judge_predecessor(present=True, dead=dead, first=first, turn_over=turn_over)

    def next_ahead(self) -> None:
        """Forget the predecessor (it left); the next entry ahead is the predecessor now."""
        self._ahead.pop()
        self._decoded = None

    def leave(self, *, holding: bool = False) -> bool:
        """Remove our entry (if still ours), stamping our successor's turn when we are first
        (`holding`: we leave because we took the lock). True when this call removed it:
        leaving holding the lock is how the head accepts its grant, and the removal
        succeeds for only one of the head and a successor passing it over."""
        if not self.entry:
            return False
        entry, self.entry = self.entry, ""
        if self._dir.queue_record(self.name, entry) != self._text:
            return False  # ended by someone else; the ticket may be a newcomer's by now
        if self._ahead:
            return self._queues.drop(self.name, entry)  # first or not: the queue tells
        return self._queues.leave_as_head(self.name, entry, self.ticket, holding=holding)

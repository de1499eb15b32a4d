"""One journal record: what happened to a lock, when, to whom, done by which process.

A record is one line of compact JSON with its keys in a fixed order, `t` (the time) first,
so that a reader can find record starts (`{"t":`) and times without parsing a whole line.
The standard library only, and no `json.dumps` on the write path: the guards write a record
from a short process on every denied tool call, and the lock path writes two per cycle.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _quote
from typing import Any, Final

MAX_RECORD_BYTES: Final = 8192
"""The largest record written, newline included: one `write(2)`, and a bound on how far a
reader looks for the start of the next record after a torn one. Longer texts (a reason, a
file name, a cycle of many agents) are cut short and the record says `"truncated":true`."""

RECORD_START: Final = b'{"t":'
"""Every record, and nothing inside a record (JSON escapes every quote in its strings),
begins with these bytes."""

# The kinds of record (the `kind` key). Plain strings: the hook imports no enum machinery.
GRANT: Final = "grant"
WAIT_BEGIN: Final = "wait-begin"
WAIT_END: Final = "wait-end"
RELEASE: Final = "release"
HAND_OVER: Final = "hand-over"
RECLAIM: Final = "reclaim"
PASS_OVER: Final = "pass-over"
OPERATOR_RELEASE: Final = "operator-release"
DENIED: Final = "denied"
DEADLOCK: Final = "deadlock"
KINDS: Final = (
    GRANT,
    WAIT_BEGIN,
    WAIT_END,
    RELEASE,
    HAND_OVER,
    RECLAIM,
    PASS_OVER,
    OPERATOR_RELEASE,
    DENIED,
    DEADLOCK,
)
JOURNAL_KINDS: Final = KINDS  # the names the lock store's entrance gives them

# How a wait ended (`outcome` of a wait-end record).
GRANTED: Final = "granted"
TIMED_OUT: Final = "timed-out"
CANCELLED: Final = "cancelled"
VICTIM: Final = "victim"
OUTCOMES: Final = (GRANTED, TIMED_OUT, CANCELLED, VICTIM)

UPGRADE: Final = "upgrade"
"""The outcome of a grant or hand-over that turned its agent's read into an exclusive hold:
the hold goes on (no new hold; its release's `held` counts from the read's grant)."""


@dataclass(frozen=True, slots=True)
class CycleStep:
    """One agent of a deadlock: it waits for `waits_on`, which `held_by` holds."""

    agent: str
    waits_on: str
    held_by: str


JournalStep = CycleStep
"""The name the lock store's entrance gives `CycleStep` (the core has a `CycleStep` too)."""


@dataclass(slots=True)
class JournalRecord:
    """One event of the lock service (never changed once made: not frozen only because a
    frozen dataclass of twenty fields takes six times as long to make, and a reader makes a
    million of them). Every record has the first eight fields; the rest
    belong to some kinds only (None, or empty, elsewhere):

    - `fence`: grant, hand-over: the grant's fencing number (PostgreSQL; None on the lock
      directory, which has none);
    - `waited`: wait-end (the whole wait), deadlock (per agent, in `costs`);
    - `held`: release, hand-over, reclaim, operator-release: how long the lock was held
      (seconds; None when the record of the grant was unreadable);
    - `outcome`: wait-end: granted, timed-out, cancelled or victim; grant, hand-over:
      shared (a read), upgrade (a read made exclusive: the same hold goes on);
    - `other`: hand-over: the agent that released (`agent` is the one it went to); reclaim:
      the agent whose lock was taken back is `agent`, `other` the reclaiming process's agent
      if it has one; operator-release: who asked (`lockyard clean`, an admin sandbox);
    - `reason`: reclaim: the proof that the holder is dead; pass-over: why the head was
      passed over; denied: what the guard told the agent; operator-release: the command;
    - `guard`: denied: write, commit or shell;
    - `cycle`, `victim`, `released`, `costs`: deadlock: the cycle, the agent that gave way,
      the files it held (released for it), and how long each agent of the cycle had waited
      when the cycle was broken.

    `agent` is the agent the event happened to (the holder released, the waiter that waited,
    the victim of a deadlock); `session` names the backend session that made the change (a
    PostgreSQL session number, or on the lock directory the process as `pid.start_time`)."""

    time: float
    kind: str
    namespace: str
    agent: str
    file: str
    session: str
    pid: int
    host: str
    fence: int | None = None
    waited: float | None = None
    held: float | None = None
    outcome: str | None = None
    other: str | None = None
    reason: str | None = None
    guard: str | None = None
    cycle: tuple[CycleStep, ...] = ()
    victim: str | None = None
    released: tuple[str, ...] = ()
    costs: Mapping[str, float] = field(default_factory=dict)
    truncated: bool = False

    def agents(self) -> set[str]:
        """Every agent the record names (a filter by agent matches any of them)."""
        names = {self.agent}
        if self.other:
            names.add(self.other)
        names.update(step.agent for step in self.cycle)
        return names

    def files(self) -> set[str]:
        """Every file the record names (a filter by file matches any of them)."""
        names = {self.file} if self.file else set()
        names.update(step.waits_on for step in self.cycle)
        names.update(self.released)
        return names

    def to_json(self) -> str:
        """The record as one line of JSON (without its newline), as the journal holds it."""
        return encode(self).decode("ascii").rstrip("\n")

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.to_json())
        return data


def process_session(pid: int, start_time: int | None) -> str:
    """The `session` of a record made by a process with no other session (the lock
    directory's): `pid.start_time`, one life of one process (a reused pid has another)."""
    return f"{pid}.{start_time or 0}"


def encode(record: JournalRecord) -> bytes:
    """The record's line, newline included, at most MAX_RECORD_BYTES long (ASCII only)."""
    line = _encode(record)
    for text_limit, list_limit in ((1024, 32), (16, 8)):
        if len(line) <= MAX_RECORD_BYTES:
            break
        line = _encode(_shortened(record, text_limit, list_limit))
    return line


def _shortened(record: JournalRecord, limit: int, items: int) -> JournalRecord:
    def cut(text: str) -> str:
        return text[:limit]

    def cut_optional(text: str | None) -> str | None:
        return None if text is None else text[:limit]

    return JournalRecord(
        time=record.time, kind=cut(record.kind), namespace=cut(record.namespace),
        agent=cut(record.agent), file=cut(record.file), session=cut(record.session),
        pid=record.pid, host=cut(record.host), fence=record.fence, waited=record.waited,
        held=record.held, outcome=cut_optional(record.outcome), other=cut_optional(record.other),
        reason=cut_optional(record.reason), guard=cut_optional(record.guard),
        cycle=tuple(
            CycleStep(cut(s.agent), cut(s.waits_on), cut(s.held_by)) for s in record.cycle[:items]
        ),
        victim=cut_optional(record.victim),
        released=tuple(cut(f) for f in record.released[:items]),
        costs={cut(k): v for k, v in list(record.costs.items())[:items]}, truncated=True,
    )  # fmt: skip


def _number(value: float) -> str:
    return f"{value:.6f}" if math.isfinite(value) else "0"


def _encode(r: JournalRecord) -> bytes:
    parts = [
        f'{{"t":{_number(r.time)},"kind":{_quote(r.kind)},"ns":{_quote(r.namespace)},'
        f'"agent":{_quote(r.agent)},"file":{_quote(r.file)},"session":{_quote(r.session)},'
        f'"pid":{int(r.pid)},"host":{_quote(r.host)}'
    ]
    if r.fence is not None:
        parts.append(f',"fence":{int(r.fence)}')
    if r.waited is not None:
        parts.append(f',"waited":{_number(r.waited)}')
    if r.held is not None:
        parts.append(f',"held":{_number(r.held)}')
    if r.outcome is not None:
        parts.append(f',"outcome":{_quote(r.outcome)}')
    if r.other is not None:
        parts.append(f',"other":{_quote(r.other)}')
    if r.reason is not None:
        parts.append(f',"reason":{_quote(r.reason)}')
    if r.guard is not None:
        parts.append(f',"guard":{_quote(r.guard)}')
    if r.cycle:
        steps = ",".join(
            f"[{_quote(s.agent)},{_quote(s.waits_on)},{_quote(s.held_by)}]" for s in r.cycle
        )
        parts.append(f',"cycle":[{steps}]')
    if r.victim is not None:
        parts.append(f',"victim":{_quote(r.victim)}')
    if r.released:
        parts.append(f',"released":[{",".join(_quote(f) for f in r.released)}]')
    if r.costs:
        costs = ",".join(f"{_quote(k)}:{_number(v)}" for k, v in r.costs.items())
        parts.append(f',"costs":{{{costs}}}')
    if r.truncated:
        parts.append(',"truncated":true')
    parts.append("}\n")
    return "".join(parts).encode("ascii")


class LockLines:
    """The lines of the lock-path records one process writes in one namespace (a grant, a
    wait, a release: two per lock cycle), with all but the time and the measured figures
    encoded once: what never changes (namespace, session, process, host) per store, and the
    kind, agent and file per lock an agent takes again and again. The same bytes as
    `encode` of the same record."""

    _KEEP: Final = 1024
    """Encoded (kind, agent, file) kept at most; then forgotten all at once (a cache)."""

    def __init__(self, namespace: str, session: str, pid: int, host: str) -> None:
        self.namespace, self.session, self.pid, self.host = namespace, session, pid, host
        self._ns = _quote(namespace)
        self._tail = f',"session":{_quote(session)},"pid":{int(pid)},"host":{_quote(host)}'
        self._middles: dict[tuple[str, str, str], bytes] = {}

    def line(
        self, time: float, kind: str, agent: str, file: str, *,
        waited: float | None = None, held: float | None = None, outcome: str | None = None,
    ) -> bytes:  # fmt: skip
        middle = self._middles.get((kind, agent, file))
        if middle is None:
            middle = self._middle(kind, agent, file)
        # Formatted as `encode` formats them (`%.6f`, `_number`): a grant, a release.
        if waited is None and outcome is None and math.isfinite(time):
            if held is None:
                line = b'{"t":%.6f%s}\n' % (time, middle)
            elif math.isfinite(held):
                line = b'{"t":%.6f%s,"held":%.6f}\n' % (time, middle, held)
            else:
                line = b'{"t":%.6f%s,"held":0}\n' % (time, middle)
        else:
            figures = _optional_figures(waited, held, outcome)
            line = b'{"t":%s%s%s}\n' % (_number(time).encode(), middle, figures.encode())
        if len(line) <= MAX_RECORD_BYTES:
            return line
        return encode(  # a huge file name: shortened as any record is
            JournalRecord(time, kind, self.namespace, agent, file, self.session, self.pid,
                          self.host, waited=waited, held=held, outcome=outcome)
        )  # fmt: skip

    def _middle(self, kind: str, agent: str, file: str) -> bytes:
        middle = (
            f',"kind":{_quote(kind)},"ns":{self._ns},"agent":{_quote(agent)},'
            f'"file":{_quote(file)}{self._tail}'
        ).encode("ascii")
        if len(middle) > MAX_RECORD_BYTES:
            return middle  # shortened by `encode` each time: rare, and not worth keeping
        if len(self._middles) >= self._KEEP:
            self._middles.clear()
        self._middles[(kind, agent, file)] = middle
        return middle


def _optional_figures(waited: float | None, held: float | None, outcome: str | None) -> str:
    text = ""
    if waited is not None:
        text += f',"waited":{_number(waited)}'
    if held is not None:
        text += f',"held":{_number(held)}'
    if outcome is not None:
        text += f',"outcome":{_quote(outcome)}'
    return text


class BadRecordError(ValueError):
    """A line that is not a whole journal record (torn, foreign, or damaged)."""


def decode(line: bytes | str) -> JournalRecord:
    """The record of one line; BadRecordError when it is not a whole record."""
    try:
        data = loads_text(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRecordError(f"not JSON: {exc}") from None
    return from_dict(data)


def loads_text(text: bytes | str) -> Any:
    """`json.loads`, with every lone surrogate (an escape like `\\ud800` that no pair
    completes) replaced by U+FFFD: JSON lets a line carry one, but no terminal, page or
    database can encode it, so a hostile or damaged name would fail whoever shows it."""
    data = json.loads(text)
    if isinstance(text, bytes):
        suspect = b"\\ud" in text or b"\\uD" in text
    else:
        suspect = "\\ud" in text or "\\uD" in text
    return _whole_text(data) if suspect else data


def _whole_text(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, list):
        return [_whole_text(item) for item in value]
    if isinstance(value, dict):
        return {_whole_text(key): _whole_text(item) for key, item in value.items()}
    return value


_REQUIRED_TEXT: Final = ("kind", "ns", "agent", "file", "session", "host")


def from_dict(data: Any) -> JournalRecord:
    """The record of a decoded JSON object; BadRecordError when it is not one. (The common
    record, with no list in it, is checked with as few calls as can be: a reader may check
    a million.)"""
    if type(data) is not dict:
        raise BadRecordError("not a JSON object")
    try:
        record = JournalRecord(
            data["t"], data["kind"], data["ns"], data["agent"], data["file"],
            data["session"], data["pid"], data["host"],
        )  # fmt: skip
    except KeyError as exc:
        raise BadRecordError(f"no {exc.args[0]!r} key") from None
    for name in _REQUIRED_TEXT:
        if type(data[name]) is not str:
            raise BadRecordError(f"{name} is not a string")
    if type(record.time) is not float:
        record.time = _float(record.time)
    if type(record.pid) is not int:
        raise BadRecordError("pid is not an integer")
    if len(data) > 8:
        _optional_fields(record, data)
    return record


def _optional_fields(record: JournalRecord, data: dict[str, Any]) -> None:
    record.fence = _optional(_int, data.get("fence"))
    record.waited = _optional(_float, data.get("waited"))
    record.held = _optional(_float, data.get("held"))
    record.outcome = _optional(_text, data.get("outcome"))
    record.other = _optional(_text, data.get("other"))
    record.reason = _optional(_text, data.get("reason"))
    record.guard = _optional(_text, data.get("guard"))
    record.victim = _optional(_text, data.get("victim"))
    if "cycle" in data:
        record.cycle = tuple(_step(step) for step in _list(data["cycle"]))
    if "released" in data:
        record.released = tuple(_text(name) for name in _list(data["released"]))
    if "costs" in data:
        record.costs = _costs(data["costs"])
    record.truncated = data.get("truncated") is True


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise BadRecordError(f"{value!r} is not a string")
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRecordError(f"{value!r} is not an integer")
    return value


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRecordError(f"{value!r} is not a number")
    return float(value)


def _list(value: Any) -> Sequence[Any]:
    if not isinstance(value, list):
        raise BadRecordError(f"{value!r} is not a list")
    return value


def _optional(convert: Any, value: Any) -> Any:
    return None if value is None else convert(value)


def _step(value: Any) -> CycleStep:
    items = _list(value)
    if len(items) != 3:
        raise BadRecordError(f"{value!r} is not a cycle step")
    return CycleStep(_text(items[0]), _text(items[1]), _text(items[2]))


def _costs(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        raise BadRecordError(f"{value!r} is not an object of costs")
    return {_text(k): _float(v) for k, v in value.items()}


def deadlock_record(
    *,
    time: float,
    namespace: str,
    cycle: Iterable[CycleStep],
    victim: str,
    victim_waits_on: str,
    released: Iterable[str],
    costs: Mapping[str, float],
    session: str,
    pid: int,
    host: str,
) -> JournalRecord:
    """The record of a deadlock a monitor broke: `agent` is the victim."""
    return JournalRecord(
        time=time, kind=DEADLOCK, namespace=namespace, agent=victim, file=victim_waits_on,
        session=session, pid=pid, host=host, cycle=tuple(cycle), victim=victim,
        released=tuple(sorted(released)), costs=dict(costs),
    )  # fmt: skip

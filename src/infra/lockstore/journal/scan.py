"""Reading a segment's bytes into records, trusting nothing in them.

A segment is read in chunks (a segment of a gigabyte costs no gigabyte of memory), forward
or backward; a line longer than a record can be is skipped without being kept; a line that
is no whole record (torn by a write cut short, damaged, or foreign) is skipped, but a whole
record glued to its end (a torn line has no newline) is still found, by its `{"t":` start.
Times are read from the start of a line without parsing it, so a reader can bisect a
segment (records are appended in time order, give or take the few microseconds between
concurrent writers).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

from .record import MAX_RECORD_BYTES, RECORD_START, BadRecordError, JournalRecord, decode

CHUNK_BYTES: Final = 1 << 20
_TIME_END: Final = b","
_SEEK_MARGIN: Final = 2.0
"""Seconds a bisection starts early: concurrent writers append a few microseconds out of
order, and a clock may step back a little."""


def parse_line(line: bytes) -> JournalRecord | None:
    """The record of one line (without its newline), or None when it holds no whole one."""
    if not line.startswith(RECORD_START):
        start = line.rfind(RECORD_START)
        if start < 0:
            return None
        line = line[start:]
    try:
        return decode(line)
    except BadRecordError:
        start = line.rfind(RECORD_START, 1)  # a torn record, then a whole one
        return parse_line(line[start:]) if start > 0 else None


def time_of(line: bytes) -> float | None:
    """The time of a line's record, read from its first bytes; None when it has none."""
    if not line.startswith(RECORD_START):
        return None
    end = line.find(_TIME_END, len(RECORD_START), len(RECORD_START) + 32)
    if end < 0:
        return None
    try:
        return float(line[len(RECORD_START) : end])
    except ValueError:
        return None


def lines_forward(fd: int, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """Each whole line between byte offsets `start` and `end` (starting at a line start),
    with the offset just after it; a line longer than a record can be is skipped."""
    position = start
    pending = b""
    skipping = False
    while position < end:
        chunk = os.pread(fd, min(CHUNK_BYTES, end - position), position)
        if not chunk:
            break
        base = position - len(pending)
        position += len(chunk)
        data = pending + chunk if pending else chunk
        cursor = 0
        while True:
            newline = data.find(b"\n", cursor)
            if newline < 0:
                break
            if not skipping:
                yield base + newline + 1, data[cursor:newline]
            skipping = False
            cursor = newline + 1
        pending = data[cursor:]
        if len(pending) > MAX_RECORD_BYTES:
            pending = b""
            skipping = True


def lines_backward(fd: int, end: int) -> Iterator[bytes]:
    """Each whole line before byte offset `end`, the last first."""
    position = end
    pending = b""
    while position > 0:
        size = min(CHUNK_BYTES, position)
        position -= size
        data = os.pread(fd, size, position) + pending
        lines = data.split(b"\n")
        pending = lines[0] if position > 0 else b""
        first = 1 if position > 0 else 0
        if len(pending) > MAX_RECORD_BYTES:
            pending = b""  # part of an overlong line: never a record
        for line in reversed(lines[first:]):
            if line and len(line) <= MAX_RECORD_BYTES:
                yield line
    if pending and len(pending) <= MAX_RECORD_BYTES:
        yield pending


def whole_end(fd: int, size: int) -> int:
    """The offset just after the last newline before `size` (a record being written, or
    torn, past it is not whole yet)."""
    position = size
    while position > 0:
        step = min(MAX_RECORD_BYTES * 2, position)
        data = os.pread(fd, step, position - step)
        newline = data.rfind(b"\n")
        if newline >= 0:
            return position - step + newline + 1
        position -= step
        if size - position > MAX_RECORD_BYTES * 2:
            return position  # an overlong line: nothing after `position` is a record
    return 0


def misses_window(fd: int, end: int, since: float | None, until: float | None) -> bool:
    """Whether the records before `end` all fall outside `since <= t < until` (give or take
    the margin), told from the times of the first and the last (a few reads; a segment's
    summary would cost a parse of its whole cache)."""
    if since is not None:
        last = last_time(fd, end)
        if last is not None and last < since - _SEEK_MARGIN:
            return True
    if until is not None:
        first = first_time(fd, end)
        if first is not None and first >= until + _SEEK_MARGIN:
            return True
    return False


def inside_window(fd: int, end: int, since: float | None, until: float | None) -> bool:
    """Whether the records before `end` all fall inside `since <= t < until` (by the margin),
    told the same way: a sealed segment so judged is summed from its summary, and one the
    window cuts is read, so `stats --since` opens the summaries of whole segments only."""
    if since is not None:
        first = first_time(fd, end)
        if first is None or first < since + _SEEK_MARGIN:
            return False
    if until is not None:
        last = last_time(fd, end)
        if last is None or last >= until - _SEEK_MARGIN:
            return False
    return True


def first_time(fd: int, end: int) -> float | None:
    """The time of the first record before `end` (None: none near the start)."""
    return _record_after(fd, 0, end)[1] if end else None


def last_time(fd: int, end: int) -> float | None:
    """The time of the last record before `end` (None: none near the end)."""
    return next((t for line in _last_lines(fd, end) if (t := time_of(line)) is not None), None)


def _last_lines(fd: int, end: int) -> Iterator[bytes]:
    """The last few lines before `end`, the last first (a torn one or two end no search)."""
    for count, line in enumerate(lines_backward(fd, end)):
        if count >= 8:
            return
        yield line


def offset_of_time(fd: int, end: int, since: float) -> int:
    """A line start before which every record is older than `since` (give or take the
    margin): the offset to read a segment from for records since `since`."""
    low, _high = _bisect(fd, end, since - _SEEK_MARGIN)
    return low


def end_of_time(fd: int, end: int, until: float) -> int:
    """A line start from which every record is newer than `until` (give or take the
    margin): the offset to read a segment backwards from for records before `until`, so
    that a window in the middle of a big segment costs its own records, not those after it."""
    target = until + _SEEK_MARGIN
    _low, high = _bisect(fd, end, target)
    start, t = _record_after(fd, high, end)
    return start if t is not None and t >= target else end  # unsure (a damaged part): all


def _bisect(fd: int, end: int, target: float) -> tuple[int, int]:
    """Offsets a sixteenth of a chunk apart or less around where records reach `target`:
    `low`, a line start before which every record is older; `high`, an offset the first
    timed record after which is not older (or there is none near it: the caller checks)."""
    low, high = 0, end
    while high - low > CHUNK_BYTES // 16:
        middle = (low + high) // 2
        start, t = _record_after(fd, middle, end)
        if t is None or start >= high:
            high = middle
        elif t < target:
            low = start
        else:
            high = middle
    return low, high


def _record_after(fd: int, offset: int, end: int) -> tuple[int, float | None]:
    """The first line start after `offset` (or 0) whose record has a time, and that time;
    (`end`, None) when there is none within a few records."""
    data = os.pread(fd, min(MAX_RECORD_BYTES * 4, end - offset), offset)
    cursor = 0 if offset == 0 else data.find(b"\n") + 1
    if offset and cursor == 0:
        return end, None
    while cursor < len(data):
        t = time_of(data[cursor : cursor + 64])
        if t is not None:
            return offset + cursor, t
        newline = data.find(b"\n", cursor)
        if newline < 0:
            break
        cursor = newline + 1
    return end, None


def open_segment(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)


def records_in(
    path: Path, start: int = 0, keep: Callable[[bytes], bool] | None = None
) -> tuple[list[JournalRecord], int]:
    """The records of a segment from byte offset `start` (a line start) to its last whole
    line, and the offset after that line; `keep` drops a line before it is parsed."""
    fd = open_segment(path)
    try:
        end = whole_end(fd, os.fstat(fd).st_size)
        records = []
        for _after, line in lines_forward(fd, start, end):
            if keep is not None and not keep(line):
                continue
            record = parse_line(line)
            if record is not None:
                records.append(record)
        return records, max(start, end)
    finally:
        os.close(fd)

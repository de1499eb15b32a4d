"""`FileJournal`: the reader of a lock directory's journal (see files.py for the layout)."""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..inotify import IN_CREATE, IN_MODIFY, IN_MOVED_FROM, IN_MOVED_TO, Inotify
from .files import ACTIVE, journal_dir, sealed_segments
from .query import EVERYTHING, JournalQuery
from .record import JournalRecord
from .scan import (
    end_of_time,
    first_time,
    inside_window,
    lines_backward,
    lines_forward,
    misses_window,
    offset_of_time,
    open_segment,
    parse_line,
    time_of,
    whole_end,
)
from .summary import SegmentSummary, Stats, cached_summary

_FOLLOW_MASK: Final = IN_MODIFY | IN_CREATE | IN_MOVED_FROM | IN_MOVED_TO
_STOP_CHECK: Final = 1.0
_POLL: Final = 0.2  # only without inotify


@dataclass(frozen=True, slots=True)
class _Segment:
    path: Path
    sealed: bool


class FileJournal:
    """The journal of one lock directory (`<lock dir>/journal/`), read-only."""

    def __init__(self, lock_dir: str | os.PathLike[str]) -> None:
        self.directory = journal_dir(lock_dir)

    @property
    def location(self) -> str:
        return str(self.directory)

    def __enter__(self) -> FileJournal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    def _segments(self) -> list[_Segment]:
        segments = [_Segment(path, True) for path in sealed_segments(self.directory)]
        return [*segments, _Segment(self.directory / ACTIVE, False)]

    def _summary(self, segment: _Segment) -> SegmentSummary | None:
        if not segment.sealed:
            return None
        try:
            return cached_summary(segment.path)
        except OSError:
            return None  # sealed and deleted since the listing

    def _skips(self, segment: _Segment, fd: int, end: int, query: JournalQuery) -> bool:
        """Whether no record of `segment` (open on `fd`, whole up to `end`) can match: its
        own first and last times say when it misses the window; only a query that picks
        records by what they name asks the summary (a parse of its cache) for more."""
        if misses_window(fd, end, query.since, query.until):
            return True
        if not query.narrows_records:
            return False
        summary = self._summary(segment)
        return summary is not None and not query.could_match(summary)

    # -- reading -----------------------------------------------------------------------------

    def records(self, query: JournalQuery = EVERYTHING) -> Iterator[JournalRecord]:
        keep = query.prefilter()
        for segment in self._segments():
            yield from self._read(segment, query, keep)

    def _read(
        self,
        segment: _Segment,
        query: JournalQuery,
        keep: Callable[[bytes], bool] | None,
        *,
        judged: bool = False,
    ) -> Iterator[JournalRecord]:
        """The matches of `segment` (`judged`: the caller knows it may hold some)."""
        try:
            fd = open_segment(segment.path)
        except OSError:
            return
        try:
            end = whole_end(fd, os.fstat(fd).st_size)
            if not judged and self._skips(segment, fd, end, query):
                return
            start = 0 if query.since is None else offset_of_time(fd, end, query.since)
            for _after, line in lines_forward(fd, start, end):
                if query.until is not None:
                    t = time_of(line)
                    if t is not None and t >= query.until:
                        if t >= query.until + 2.0:
                            return  # past the window (give or take writers' order)
                        continue
                if keep is not None and not keep(line):
                    continue
                record = parse_line(line)
                if record is not None and query.matches(record):
                    yield record
        finally:
            os.close(fd)

    def latest(self, query: JournalQuery = EVERYTHING, limit: int = 50) -> list[JournalRecord]:
        return self._latest(query, limit, None)

    def _latest(
        self, query: JournalQuery, limit: int, tail: tuple[int, int] | None
    ) -> list[JournalRecord]:
        """The last `limit` matches; with `tail` (a descriptor and an offset), the segment
        open on that descriptor is read only up to that offset, and any newer one not at all
        (a follower reads those)."""
        if limit <= 0:
            return []
        found: list[JournalRecord] = []
        keep = query.prefilter()
        tail_file = None if tail is None else _file_id(os.fstat(tail[0]))
        for segment in reversed(self._segments()):
            try:
                fd = open_segment(segment.path)
            except OSError:
                continue
            try:
                this_file = _file_id(os.fstat(fd))
                if tail is not None and this_file == tail_file:
                    end = tail[1]
                    tail_file = None  # found: everything older is read whole
                elif tail_file is not None:
                    continue  # newer than the follower's start: it reads it
                else:
                    end = whole_end(fd, os.fstat(fd).st_size)
                if self._skips(segment, fd, end, query):
                    if misses_window(fd, end, query.since, None):
                        break  # older than the window: older segments are older still
                    continue
                if query.until is not None:
                    end = end_of_time(fd, end, query.until)
                for record in _backward(fd, end, query, keep):
                    found.append(record)
                    if len(found) >= limit:
                        return found[::-1]
                first = first_time(fd, end)
            finally:
                os.close(fd)
            if first is not None and query.since is not None and first < query.since - 2.0:
                break  # older segments are older still
        return found[::-1]

    def stats(self, query: JournalQuery = EVERYTHING) -> Stats:
        total = Stats()
        if query.narrows_records:
            for record in self.records(query):
                total.add(record)
            return total
        for segment in self._segments():
            try:
                fd = open_segment(segment.path)
            except OSError:
                continue  # sealed and deleted since the listing
            try:
                end = whole_end(fd, os.fstat(fd).st_size)
                if misses_window(fd, end, query.since, query.until):
                    continue
                # A summary (a parse of its cache) only for a segment the window takes whole.
                whole = segment.sealed and inside_window(fd, end, query.since, query.until)
            finally:
                os.close(fd)
            summary = self._summary(segment) if whole else None
            if summary is not None and _inside(summary.stats, query):
                total.merge(summary.stats)
                continue
            for record in self._read(segment, query, None, judged=True):
                total.add(record)
        return total

    # -- following -----------------------------------------------------------------------------

    def follow(
        self,
        query: JournalQuery = EVERYTHING,
        *,
        backlog: int = 0,
        stop: threading.Event | None = None,
    ) -> Iterator[JournalRecord]:
        tail = _Tail(self.directory, query)
        try:
            yield from tail.start(self, backlog)
            while stop is None or not stop.is_set():
                tail.wait(_STOP_CHECK)
                yield from tail.read_new()
        finally:
            tail.close()

    async def follow_async(
        self, query: JournalQuery = EVERYTHING, *, backlog: int = 0
    ) -> AsyncIterator[JournalRecord]:
        tail = _Tail(self.directory, query)
        try:
            for record in tail.start(self, backlog):
                yield record
            while True:
                await tail.wait_async()
                for record in tail.read_new():
                    yield record
        finally:
            tail.close()


def _number(segment: Path) -> int:
    return int(segment.name[:8])


def _file_id(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _backward(
    fd: int, end: int, query: JournalQuery, keep: Callable[[bytes], bool] | None
) -> Iterator[JournalRecord]:
    for line in lines_backward(fd, end):
        t = time_of(line)
        if t is not None:
            if query.since is not None and t < query.since - 2.0:
                return
            if query.until is not None and t >= query.until:
                continue  # after the window: not worth parsing
        if keep is not None and not keep(line):
            continue
        record = parse_line(line)
        if record is not None and query.matches(record):
            yield record


def _inside(stats: Stats, query: JournalQuery) -> bool:
    """Every record of these figures falls in the query's window."""
    if stats.first is None or stats.last is None:
        return True
    return query.in_window(stats.first) and query.in_window(stats.last)


class _Tail:
    """The end of the journal, read as it grows: `current.jsonl` from a remembered offset,
    across the sealing of segments."""

    def __init__(self, directory: Path, query: JournalQuery) -> None:
        self.directory = directory
        self.query = query
        self.keep = query.prefilter()
        self.fd = -1
        self.position = 0
        self.last_sealed = 0
        """The number of the last sealed segment read (or older than where the tail began)."""
        self.finished: tuple[int, int] | None = None
        """The file the tail read until it was sealed (skipped when listed as sealed)."""
        self.inotify = Inotify.open()
        directory.mkdir(mode=0o700, exist_ok=True)  # FileNotFoundError: no lock directory
        if self.inotify is not None:
            self.inotify.add_watch(directory, _FOLLOW_MASK)  # before the first read

    def start(self, journal: FileJournal, backlog: int) -> list[JournalRecord]:
        """Open the tail at the journal's end; the last `backlog` matches before it."""
        self._open_active()
        if backlog <= 0:
            return []
        tail = None if self.fd < 0 else (self.fd, self.position)
        return journal._latest(self.query, backlog, tail)

    def _open_active(self) -> None:
        try:
            self.fd = open_segment(self.directory / ACTIVE)
        except FileNotFoundError:
            self.fd, self.position = -1, 0
        else:
            self.position = whole_end(self.fd, os.fstat(self.fd).st_size)
        # Segments sealed from now on are read by the tail (listed after the open: one sealed
        # in between is older than the file we hold, and the backlog's).
        sealed = sealed_segments(self.directory)
        self.last_sealed = _number(sealed[-1]) if sealed else 0

    def read_new(self) -> Iterator[JournalRecord]:
        """The records written since the last call, across any number of sealings."""
        while True:
            if self.fd >= 0:
                yield from self._drain()
                if not self._sealed_since():
                    return
                yield from self._drain()  # whatever reached it before its sealing
                self.finished = _file_id(os.fstat(self.fd))
                os.close(self.fd)
                self.fd = -1
            try:
                fd = open_segment(self.directory / ACTIVE)
            except FileNotFoundError:
                fd = -1
            current = None if fd < 0 else _file_id(os.fstat(fd))
            yield from self._sealed_after(current)
            if fd < 0:
                return
            self.fd, self.position = fd, 0  # then drained, and sealed again meanwhile?

    def _sealed_after(self, current: tuple[int, int] | None) -> Iterator[JournalRecord]:
        """Every segment sealed since the last one read, whole, in order (several when the
        writers sealed faster than this reader woke), but the one just read to its end and
        the one about to be read as the current one."""
        for path in sealed_segments(self.directory):
            number = _number(path)
            if number <= self.last_sealed:
                continue
            self.last_sealed = number
            try:
                fd = open_segment(path)
            except OSError:
                continue  # deleted to keep the journal in bounds: its records are gone
            try:
                if _file_id(os.fstat(fd)) in (self.finished, current):
                    continue
                yield from self._lines(fd, 0, whole_end(fd, os.fstat(fd).st_size))
            finally:
                os.close(fd)

    def _drain(self) -> Iterator[JournalRecord]:
        end = whole_end(self.fd, os.fstat(self.fd).st_size)
        if end <= self.position:
            return
        start, self.position = self.position, end
        yield from self._lines(self.fd, start, end)

    def _lines(self, fd: int, start: int, end: int) -> Iterator[JournalRecord]:
        for _after, line in lines_forward(fd, start, end):
            if self.keep is not None and not self.keep(line):
                continue
            record = parse_line(line)
            if record is not None and self.query.matches(record):
                yield record

    def _sealed_since(self) -> bool:
        """True when `current.jsonl` is no longer the file we read."""
        try:
            now = os.stat(self.directory / ACTIVE)
        except FileNotFoundError:
            return True
        mine = os.fstat(self.fd)
        return (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino)

    def wait(self, timeout: float) -> None:
        if self.inotify is None:
            select.select([], [], [], min(timeout, _POLL))
            return
        ready, _, _ = select.select([self.inotify.fd], [], [], timeout)
        if ready:
            self.inotify.read_pending()

    async def wait_async(self) -> None:
        if self.inotify is None:
            import anyio

            await anyio.sleep(_POLL)
            return
        await self.inotify.wait(None)

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        if self.inotify is not None:
            self.inotify.close()

"""The lock directory's journal on disk: `<lock dir>/journal/`, segments of JSON lines.

    journal/current.jsonl       the segment being written (every writer appends here)
    journal/00000041.jsonl      sealed segments, numbered in the order they were sealed
    journal/00000041.summary    a sealed segment's summary (what stats and filters need)
    journal/.rotate             the lock a writer holds while it seals `current.jsonl`

Writing a record is one `write(2)` of the whole line on a descriptor opened with O_APPEND:
the kernel appends each write whole at the end of the file, so records of concurrent
writers in many processes never interleave; a record is at most MAX_RECORD_BYTES. A write
cut short (a full disk) or a machine that stopped mid-write leaves one torn line, which
every reader detects (it is no whole JSON object) and skips; the next record starts with
`{"t":`, so a reader finds it even when the torn line lacks its newline.

Bounded: when `current.jsonl` passes the segment size, the writer that notices seals it (a
rename to the next number, under `.rotate`) and deletes the oldest sealed segments while the
journal is over its total size. Each writer looks at the size once every MEASURE_EVERY
writes of its own, so a record costs one `write(2)` and nothing more.
`LOCKYARD_JOURNAL_MAX_MB` sets the total (default 64 MiB, about 250,000 records); a segment
is a sixteenth of it.

The journal never stands in the lock path's way: a record that cannot be written (a full
disk, an unwritable or missing directory) is dropped, counted, and logged once a minute at
most; the grant, wait or release it describes goes on as if the journal were off.
`LOCKYARD_JOURNAL=off` turns the journal off.

Standard library only: an agent CLI's hook writes a denied write's record from a short
process, and imports this and `record` alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ..errors import LockStoreError
from .record import JournalRecord, encode

log = logging.getLogger(__name__)

JOURNAL_DIR: Final = "journal"
ACTIVE: Final = "current.jsonl"
ROTATE_LOCK: Final = ".rotate"
SEALED_SUFFIX: Final = ".jsonl"
SUMMARY_SUFFIX: Final = ".summary"
SEALED_NAME: Final = re.compile(r"^(\d{8})\.jsonl$")

SWITCH_ENV: Final = "LOCKYARD_JOURNAL"
MAX_MB_ENV: Final = "LOCKYARD_JOURNAL_MAX_MB"
DEFAULT_MAX_MB: Final = 64
SEGMENTS_PER_JOURNAL: Final = 16
MIN_SEGMENT_BYTES: Final = 64 * 1024
MEASURE_EVERY: Final = 32
"""A writer looks at the segment's size (one lseek) once every this many of its writes: a
segment grows past its size by at most this many records of each writing process."""
_OFF_WORDS: Final = frozenset({"0", "off", "false", "no"})
_WARN_EVERY: Final = 60.0

_OPEN_FLAGS: Final = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW


class JournalSettingError(LockStoreError, ValueError):
    """A journal setting in the environment is not one lockyard understands."""


def journal_enabled(environ: dict[str, str] | None = None) -> bool:
    """False when `LOCKYARD_JOURNAL` says off (0, off, false, no); on otherwise."""
    value = (environ if environ is not None else os.environ).get(SWITCH_ENV, "")
    return value.strip().lower() not in _OFF_WORDS


def max_bytes_from_env(environ: dict[str, str] | None = None) -> int:
    """The journal's total size bound, from `LOCKYARD_JOURNAL_MAX_MB` (default 64)."""
    raw = (environ if environ is not None else os.environ).get(MAX_MB_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_MB << 20
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = -1.0
    if not megabytes >= 1:
        raise JournalSettingError(
            f"{MAX_MB_ENV}={raw!r} is not a size in megabytes of at least 1: set it to a number "
            f"such as {DEFAULT_MAX_MB}, or unset it"
        )
    return int(megabytes * (1 << 20))


def journal_dir(lock_dir: str | os.PathLike[str]) -> Path:
    return Path(lock_dir) / JOURNAL_DIR


def segment_bytes(max_bytes: int) -> int:
    return max(MIN_SEGMENT_BYTES, max_bytes // SEGMENTS_PER_JOURNAL)


def sealed_segments(directory: Path) -> list[Path]:
    """The sealed segments, oldest first."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(directory / name for name in names if SEALED_NAME.match(name))


class JournalFiles:
    """The writer of one lock directory's journal, shared by every store of a process.

    `append` never raises and never waits on another writer: see the module's docstring."""

    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int | None = None,
        on_sealed: Callable[[Path], None] | None = None,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes if max_bytes is not None else max_bytes_from_env()
        self.segment_bytes = segment_bytes(self.max_bytes)
        self.on_sealed = on_sealed
        """Called (in a thread of its own) with each segment this process seals."""
        self.dropped = 0
        """Records this process could not write."""
        self._fd = -1
        self._unmeasured = 0
        """Writes left before the next look at the segment's size."""
        self._guard = threading.Lock()  # opening and sealing; writes take no lock
        self._last_warning = 0.0

    def append(self, record: JournalRecord) -> bool:
        """Write one record; False (and nothing raised) when it could not be written."""
        return self.append_line(encode(record))

    def append_line(self, line: bytes) -> bool:
        sealed = None
        # One writer at a time per process (a few microseconds): a descriptor is never
        # closed while another thread of this process writes to it.
        with self._guard:
            try:
                if self._fd < 0:
                    self.directory.mkdir(mode=0o700, exist_ok=True)
                    self._fd = os.open(self.directory / ACTIVE, _OPEN_FLAGS, 0o600)
                    self._unmeasured = 0  # measured at the first write
                written = os.write(self._fd, line)
                if written != len(line):
                    raise OSError(f"wrote {written} of {len(line)} bytes (is the disk full?)")
                self._unmeasured -= 1
                # An O_APPEND descriptor's offset is the end of the write just made (every
                # writer's records before it included).
                if self._unmeasured < 0:
                    self._unmeasured = MEASURE_EVERY - 1
                    if os.lseek(self._fd, 0, os.SEEK_CUR) > self.segment_bytes:
                        sealed = self._seal()
            except OSError as error:
                self._dropped(error)
                return False
        if sealed is not None and self.on_sealed is not None:
            threading.Thread(target=self.on_sealed, args=(sealed,), daemon=True).start()
        return True

    def close(self) -> None:
        with self._guard:
            self._close()

    def _close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1

    def _seal(self) -> Path | None:
        """`current.jsonl` passed the segment size: seal it (unless another process did),
        and write to the new `current.jsonl` from now on. The sealed segment, if we sealed."""
        sealed = None
        lock = os.open(self.directory / ROTATE_LOCK, _OPEN_FLAGS, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with contextlib.suppress(FileNotFoundError):
                now = os.stat(self.directory / ACTIVE)
                mine = os.fstat(self._fd)
                same = (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)
                if same and now.st_size > self.segment_bytes:
                    sealed = self._next_sealed_name()
                    os.rename(self.directory / ACTIVE, sealed)
                    self._keep_within_bound()
            # Sealed by us or by someone else: new records go to the new current.jsonl.
            self._close()
            self._fd = os.open(self.directory / ACTIVE, _OPEN_FLAGS, 0o600)
        finally:
            os.close(lock)  # releases the flock
        return sealed

    def _next_sealed_name(self) -> Path:
        segments = sealed_segments(self.directory)
        number = int(segments[-1].name[:8]) + 1 if segments else 1
        return self.directory / f"{number:08d}{SEALED_SUFFIX}"

    def _keep_within_bound(self) -> None:
        """Delete the oldest sealed segments while the journal (with a fresh current
        segment to come) would pass its total size."""
        segments = sealed_segments(self.directory)
        sizes = []
        for path in segments:
            try:
                sizes.append(path.stat().st_size)
            except OSError:
                sizes.append(0)
        total = sum(sizes) + self.segment_bytes
        for path, size in zip(segments, sizes, strict=True):
            if total <= self.max_bytes or len(segments) <= 1:
                break
            for doomed in (path, path.with_suffix(SUMMARY_SUFFIX)):
                with contextlib.suppress(FileNotFoundError):
                    doomed.unlink()
            total -= size

    def _dropped(self, error: OSError) -> None:
        self.dropped += 1
        now = time.monotonic()
        if now - self._last_warning >= _WARN_EVERY:
            self._last_warning = now
            log.warning(
                "journal %s: a record could not be written (%s); %d dropped so far. Locks "
                "work as before; free disk space or fix the directory to record again",
                self.directory, error, self.dropped,
            )  # fmt: skip
        self._close()  # open afresh next time: the directory may have been replaced


_writers: dict[Path, JournalFiles] = {}
_writers_guard = threading.Lock()


def journal_files(lock_dir: str | os.PathLike[str]) -> JournalFiles | None:
    """This process's writer of the journal of `lock_dir`, or None when the journal is off.
    A bad `LOCKYARD_JOURNAL_MAX_MB` raises JournalSettingError (say so before serving)."""
    if not journal_enabled():
        return None
    directory = journal_dir(lock_dir)
    with _writers_guard:
        writer = _writers.get(directory)
        if writer is None:
            writer = _writers[directory] = JournalFiles(directory, on_sealed=_summarise)
        return writer


def _summarise(segment: Path) -> None:
    """Write a sealed segment's summary now, so that `stats` need not parse it later."""
    from .summary import cached_summary

    try:
        cached_summary(segment)
    except Exception:  # a summary is only a cache: the reader makes it if this fails
        log.debug("could not summarise %s", segment, exc_info=True)


def append_once(lock_dir: str | os.PathLike[str], record: JournalRecord) -> bool:
    """Write one record from a short process (an agent CLI's hook): open, one write, close.
    Never raises; False when the record could not be written or the journal is off."""
    try:
        if not journal_enabled():
            return False
        writer = JournalFiles(journal_dir(lock_dir))
    except JournalSettingError:
        return False
    try:
        return writer.append(record)
    finally:
        writer.close()

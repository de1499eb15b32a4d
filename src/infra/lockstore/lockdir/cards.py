"""The holder cards of a lock directory: `<card>.card`, the part of holder records that stays
the same from grant to grant, named by a hash of its text (`layout.py`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from typing import TYPE_CHECKING, Final

from ..errors import CorruptRecordError, LockDirError
from .layout import CARD_MARK, CARD_SUFFIX, NO_SPACE, read_record, write_record

if TYPE_CHECKING:
    from .disk import LockDir

_CARD_HASH_CHARS: Final = 24
_CARDS_REMEMBERED: Final = 4096


class HolderCards:
    """The holder cards of a lock directory: `<card>.card`, the unchanging part of the holder
    records of the grants that name it."""

    def __init__(self, directory: LockDir) -> None:
        self._dir = directory
        self._known: dict[str, str] = {}
        """card name -> its text, as read or written here (a card's name is a hash of its
        text, and a card never changes: remembering it is never stale)."""

    def write(self, text: str) -> str:
        """The name of the holder card holding `text` (a JSON object), written if missing."""
        card = hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()[:_CARD_HASH_CHARS]
        try:
            write_record(self._dir.fd, card + CARD_SUFFIX, text)
        except FileExistsError:
            try:
                there = self.read(card)
            except CorruptRecordError:
                there = None
            if there != text:  # a card is only ever written whole: this is something else
                raise LockDirError(
                    f"{card}{CARD_SUFFIX} in the lock directory is not the card the store "
                    "wrote; something else put it there. Remove it"
                ) from None
        except FileNotFoundError:
            raise self._dir.removed() from None
        except OSError as error:
            if error.errno in NO_SPACE:
                raise self._dir.full() from None
            raise
        self._remember(card, text)
        return card

    def read(self, card: str) -> str | None:
        """The text of holder card `card`, or None when there is no such card; a card
        whose text does not hash to its name is not one the store wrote (CorruptRecordError)."""
        known = self._known.get(card)
        if known is not None:
            return known
        try:
            text = read_record(self._dir.fd, card + CARD_SUFFIX)
        except (FileNotFoundError, NotADirectoryError):
            return None
        digest = hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()
        if digest[:_CARD_HASH_CHARS] != card:
            raise CorruptRecordError(f"{card}{CARD_SUFFIX} holds a text of another card")
        self._remember(card, text)
        return text

    def _remember(self, card: str, text: str) -> None:
        if len(self._known) >= _CARDS_REMEMBERED:
            self._known.clear()
        self._known[card] = text

    def spelled_out(self, entry: str, token: str, text: str) -> str | None:
        """Grant record `@<card>:<acquired at>` as the full holder record; None when the
        card is gone."""
        card, colon, acquired_at = text[1:].partition(":")
        try:
            moment = float(acquired_at)
        except ValueError:
            moment = math.nan
        if not colon or not math.isfinite(moment) or not card.isalnum():
            raise CorruptRecordError(f"{entry}/{token} holds {text!r}, not a grant record")
        card_text = self.read(card)
        if card_text is None:
            return None
        if not card_text.endswith("}"):
            raise CorruptRecordError(f"{card}{CARD_SUFFIX} is not a JSON object")
        return f'{card_text[:-1]},"token":{json.dumps(token)},"acquired_at":{moment!r}}}'

    def names(self) -> list[str]:
        """The names of the holder cards in the directory."""
        return self._dir.names_with(CARD_SUFFIX)

    def named_in(self, entry: str) -> set[str]:
        """The holder cards that the grant records in directory `entry` (a lock, or a
        staging) name; empty when it is no directory of ours."""
        try:
            entry_fd = self._dir.open_own_dir(entry)
        except LockDirError:
            return set()
        if entry_fd is None:
            return set()
        named = set()
        try:
            for token in os.listdir(entry_fd):
                with contextlib.suppress(OSError):
                    text = os.readlink(token, dir_fd=entry_fd)
                    if text.startswith(CARD_MARK):
                        named.add(text[1:].partition(":")[0])
        except OSError:
            pass
        finally:
            os.close(entry_fd)
        return named

    def remove(self, card: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(card + CARD_SUFFIX, dir_fd=self._dir.fd)
        self._known.pop(card, None)

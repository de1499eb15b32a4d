"""The records of a store's grants: short, `@<card>:<acquired at>`, naming a holder card that
holds the rest (the agent, the processes, the key, the checkout) and is written once per
agent and key, so that a grant's record lives in its symlink's inode (`layout.py`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from ..liveness import ProcessIdentity, current_process
from ..records import holder_card
from .cards import HolderCards
from .layout import CARD_MARK

_MAX_CARDS_KNOWN: Final = 4096


class GrantRecords:
    """The grant records of one store: its holder is `owner` (None: the process that makes
    the grant), its locks are of `namespace`, keyed in the checkout at `root`."""

    def __init__(
        self, cards: HolderCards, owner: ProcessIdentity | None, namespace: str, root: str
    ) -> None:
        self._cards = cards
        self._owner, self._namespace, self._root = owner, namespace, root
        self._known: dict[tuple[str, str], tuple[ProcessIdentity, str]] = {}
        """(agent, key) -> (this process, the holder card its grants name)."""

    def maker(self, agent: str, key: str) -> Callable[[], str]:
        """The record of `agent`'s grants of `key`, made when a grant is."""
        return lambda: f"{CARD_MARK}{self.card(agent, key)}:{time.time()!r}"

    def card(self, agent: str, key: str) -> str:
        """The holder card of `agent`'s grants of `key` made by this process."""
        me = current_process()
        known = self._known.get((agent, key))
        if known is not None and known[0] is me:  # a forked child is another writer
            return known[1]
        text = holder_card(self._owner or me, agent, key, self._namespace, self._root, me)
        card = self._cards.write(text)
        if len(self._known) >= _MAX_CARDS_KNOWN:
            self._known.clear()
        self._known[(agent, key)] = (me, card)
        return card

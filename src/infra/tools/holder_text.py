"""The fixed holder text for a lock whose record cannot be read (standard library only, so the
agent CLI hooks can show it without loading the tools)."""

from __future__ import annotations

from typing import Final

UNREADABLE_HOLDER: Final = "<unreadable lock record: ask the operator to run lockyard status>"
"""The `holder` shown for a lock whose record cannot be read. Such a lock is never granted
or broken (the store does not guess), so the agent sees it as held; the store's own error
text (a parser dump) is kept out of tool results."""

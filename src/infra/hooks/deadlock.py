"""`lockyard.infra.hooks.deadlock`: the stable, documented import path of the PostToolUse
lock-event hook (orchestrators import it from here).

The hook lives in `lockyard.infra.hooks.lock_events`; this module only names it here.
"""

from .lock_events import make_lock_event_hook

__all__ = ["make_lock_event_hook"]

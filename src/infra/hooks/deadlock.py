"""`lockyard.infra.hooks.deadlock`: the stable, documented import path of the PostToolUse
lock-event hook (orchestrators import it from here).

The hook lives in `lockyard.infra.hooks.lock_events`; this module only names it here.
"""

from .lock_events import events_from_result, make_lock_event_hook, tool_result_payload

__all__ = ["events_from_result", "make_lock_event_hook", "tool_result_payload"]

"""`lockyard.infra.hooks.deadlock`: the design's import path for the PostToolUse lock-event hook.

The hook lives in `lockyard.infra.hooks.lock_events`; this module only names it here.
"""

from .lock_events import events_from_result, make_lock_event_hook, tool_result_payload

__all__ = ["events_from_result", "make_lock_event_hook", "tool_result_payload"]

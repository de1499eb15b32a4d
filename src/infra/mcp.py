"""`lockyard.infra.mcp`: the design's import path for `get_mcp_servers`.

It lives in `lockyard.infra.transports.sdk.servers`; this module only names it here.
"""

from .transports.sdk.servers import get_mcp_servers, new_agent_id

__all__ = ["get_mcp_servers", "new_agent_id"]

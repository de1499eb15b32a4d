"""`lockyard.infra.mcp`: the stable, documented import path of `get_mcp_servers`
(orchestrators import it from here).

It lives in `lockyard.infra.transports.sdk.servers`; this module only names it here.
"""

from .transports.sdk.servers import get_mcp_servers

__all__ = ["get_mcp_servers"]

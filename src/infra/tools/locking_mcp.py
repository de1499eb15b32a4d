"""`lockyard.infra.tools.locking_mcp`: the stable, documented import path of the in-process
SDK server (orchestrators import it from here).

The server lives in `lockyard.infra.transports.sdk.server`; this module only names it here.
"""

from ..transports.sdk.server import create_locking_mcp_server

__all__ = ["create_locking_mcp_server"]

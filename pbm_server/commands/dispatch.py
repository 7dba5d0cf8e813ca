"""Every pbm@ command, registered.  Import ``REGISTRY`` from here (not from
``registry``) to be sure all the command modules have added theirs."""

from pbm_server.commands import account, desk, info
from pbm_server.commands.registry import REGISTRY, ServerContext

#: the modules that add commands, in the order ``help`` lists them
MODULES = (account, info, desk)

__all__ = ["MODULES", "REGISTRY", "ServerContext"]

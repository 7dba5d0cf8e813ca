"""Every pbm@ command, registered.  Import ``REGISTRY`` from here (not from
``registry``) to be sure all the command modules have added theirs."""

from pbm_server.commands import account, desk, info, observe, preferences, recovery
from pbm_server.commands.registry import REGISTRY, ServerContext

#: the modules that add commands (``help`` lists each audience's commands in
#: the order their modules are imported above)
MODULES = (account, recovery, desk, info, preferences, observe)

__all__ = ["MODULES", "REGISTRY", "ServerContext"]

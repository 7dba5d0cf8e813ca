"""Every pbm@ command, registered.  Import ``REGISTRY`` from here (not from
``registry``) to be sure all the command modules have added theirs."""

from pbm_server.commands import (
    account,
    conveniences,
    desk,
    info,
    mailsettings,
    notify,
    observe,
    people,
    preferences,
    recovery,
    votes,
)
from pbm_server.commands.registry import REGISTRY, ServerContext

#: the modules that add commands (``help`` lists each audience's commands in
#: the order their modules are imported above)
MODULES = (account, recovery, desk, info, conveniences, preferences, observe, mailsettings, notify, people, votes)

__all__ = ["MODULES", "REGISTRY", "ServerContext"]

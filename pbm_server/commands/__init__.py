"""The commands mailed to pbm@DOMAIN, one registry (``registry.py``) filled
by one module per audience:

    account.py   register/signup, password, timezone, absent (a player's account)
    info.py      games, help, status, history
    desk.py      game, turn, do (the game master)

Importing this package registers them all; ``REGISTRY`` is the list.
"""

from pbm_server.commands import account, desk, info
from pbm_server.commands.registry import REGISTRY, Audience, Command, ServerContext, command

__all__ = ["REGISTRY", "Audience", "Command", "ServerContext", "account", "command", "desk", "info"]

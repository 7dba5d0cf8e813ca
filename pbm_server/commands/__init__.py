"""The commands mailed to pbm@DOMAIN: one registry (``registry.py``), filled
by one module per audience, and ``dispatch.py``, which imports them all:

    registry.py  the ServerCommand spec, the registry, the @command decorator, dispatch
                 (where a handler's ServerRefused becomes the refused line)
    account.py   register/signup, password
    info.py      games, help (help KIND), status, history
    preferences.py  timezone, absent (a registered player's settings)
    desk.py      game, turn, do (the game master)
    dispatch.py  every command registered; what the worker imports
"""

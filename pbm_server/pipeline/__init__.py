"""A command mail's path, stage by stage: classify, authenticate, route, execute, reply; the worker that runs
them (worker) and the GM's notices about mail it had to set aside (shunts).

Imports every layer below it (base, store, mail, accounts, play, commands).
"""

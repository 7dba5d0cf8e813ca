"""Where the pure games meet the database: creating a game, applying a mail's lines and ticks (moves), turns,
the stored state, seeds, the notices and press a game causes, and what status and history show.

Imports base, store, mail and accounts.
"""

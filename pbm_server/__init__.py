"""pbm-server: an e-mail play-by-mail game server.

The path of a mail, one module each (docs/architecture.md tells the whole house):

    inbound.py     SMTP listener (aiosmtpd) and `pbm mail inject`: store, commit, then 250
    mailtext.py    a stored mail -> sender, headers, command lines, $$password$$
    senderauth.py  is the From verified? (Authentication-Results of our own MTA)
    replies.py     which lines of a reply the player wrote (quotes, our own mails, signatures)
    processing.py  the worker: loops, auth, typed routes (server / game / new game), replies into the outbox
    polling.py     the pass-then-sleep loop the worker and outbound share
    commands/      the pbm@DOMAIN commands, one registry (registry.py) filled by account.py,
                   info.py, preferences.py and desk.py; dispatch.py imports them all
    confirm.py     one-time codes that prove an address (register -> confirm CODE)
    gmdesk.py      the game master's operations, for the CLI and for mail
    views.py       status and history of a game, as a viewer sees it
    creation.py    a new game: name, options, first state
    moves.py       a mail's (or the GM's) lines through a game; a game's tick
    turns.py       running a turn; rolling a game back
    gamestate.py   storing a new state, the next deadline, what an outcome says
    seeds.py       turn seeds and the turn's random stream
    notices.py     Notices -> outbox mails; a word to all players; the GM's notices
    lookup.py      games and accounts by name/address; the audit log
    localtime.py, vacations.py, durations.py, errors.py   small shared pieces
    compose.py     Jinja templates -> RFC 5322 messages (headers, redaction)
    outbound.py    outbox -> relay (claims, retries, backoff) or Maildir
    throttle.py    password checks: one per account per mail, throttled per account and sender
    headers.py     header values cleaned of line breaks before they go into a reply
    shunts.py      the GM's summary of shunted mail, at most one per hour
    scheduler.py   deadlines, turn runs, reminders, early processing, grace, ticks; each game on its own
    deadlines.py   deadline expressions ("every Saturday 03:00 UTC")
    server.py      `pbm serve`: the parts above, put together
    settings.py    every setting: default, meaning, check; one line per problem
    cli.py         the `pbm` command
"""

__version__ = "0.1.0"

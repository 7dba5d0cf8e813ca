"""pbm-server: an e-mail play-by-mail game server.

The path of a mail, one module each:

    inbound.py     SMTP listener (aiosmtpd) and `pbm mail inject`: store, commit, then 250
    mailtext.py    a stored mail -> sender, headers, command lines, $$password$$
    replies.py     which lines of a reply the player wrote (quotes, our own mails, signatures)
    processing.py  the worker: loops, auth, routing to accounts/games, replies into the outbox
    polling.py     the pass-then-sleep loop the worker and outbound share
    accounts.py    register / password / help / games (mail to pbm@DOMAIN)
    gmdesk.py      the game master's mail commands, and status / history / timezone / absent
    gameplay.py    running a game's rules on a mail or a turn, snapshots, memberships
    compose.py     Jinja templates -> RFC 5322 messages (headers, redaction)
    outbound.py    outbox -> relay (claims, retries, backoff) or Maildir
    throttle.py    password checks: one per account per mail, throttled per account and sender
    headers.py     header values cleaned of line breaks before they go into a reply
    shunts.py      the GM's summary of shunted mail, at most one per hour
    scheduler.py   deadlines, turn runs, reminders, early processing, grace, ticks
    deadlines.py   deadline expressions ("every Saturday 03:00 UTC")
    server.py      `pbm serve`: the parts above, put together
    cli.py         the `pbm` command
"""

__version__ = "0.1.0"

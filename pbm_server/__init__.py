"""pbm-server: an e-mail play-by-mail game server.

The packages are the layers a mail crosses, each importing only those above
it in this list (tests/server/test_imports.py holds them to it; every module's
one-line job is in docs/architecture.md):

    base/       settings, clock, the one refusal (errors), durations, deadlines, local times
    store/      the database: engines and transactions, tables, finding rows
    mail/       mail in (inbound, mailtext, replies, headers, senderauth) and out (compose,
                subjects, outbound), what bounces back (bounces), why mail waits (queues)
    accounts/   the account service, password hashes, the guessing gate, one-time codes
    play/       the pure games meet the database: moves, turns, state, seeds, notices, press, views
    commands/   the pbm@DOMAIN commands, one registry
    pipeline/   a mail's stages: classify -> authenticate -> route -> execute -> reply, run by the worker
    web/        the HTTP side's application: /healthz, /metrics (read from the database)
    running/    `pbm serve` (server), the scheduler, the `pbm` command line (cli)
"""

__version__ = "0.1.0"

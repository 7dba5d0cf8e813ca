"""Lines fit a terminal (issue 17): a scripted week of each game over SMTP,
then the text part of every mail the server sent is checked.

* prose: no line longer than 78 columns (the server wraps at 72), but for a
  line that is one web address (an own-view or unsubscribe link: wrapped, it
  would no longer open);
* boards are recognised by ``pbm_server.mail.compose.is_board_line`` (a line
  mostly drawn with ``| + [ ] ( ) * $ - _ = # . : / \\ < >``); they are never
  wrapped, and they hold no TAB, no trailing blank and no leading ``>`` or
  ``From `` (what a client's quoting or a relay would change), so quoted
  with ``> `` a board still reads.
"""

from __future__ import annotations

import pytest

from pbm_server.mail.compose import MAX_LINE, is_board_line, is_link_line
from tests.harness import PbmServer
from tests.server.weeks import WEEKS, addr

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral


def test_every_mail_of_a_week_of_each_game_fits_a_terminal(pbm):
    for week in WEEKS.values():
        week(pbm)
    # the GM's mails and help too
    pbm.mail(addr("ann"), "pbm", "help\nhelp giveaway\nhelp rmpm\nhelp curio")
    pbm.cli("turn", "rollback", "gift", "1")
    pbm.cli("game", "pause", "world")
    pbm.settle()
    mails = pbm.all_sent()
    assert len(mails) > 40
    too_long, boards = [], 0
    for msg in mails:
        for line in PbmServer.text(msg).split("\n"):
            if line == "-- ":
                continue  # the signature separator's blank is meant
            if is_board_line(line):
                boards += 1
                assert "\t" not in line and line == line.rstrip() and not line.startswith((">", "From ")), line
                assert is_board_line("> " + line)  # quoted, still a board
            elif len(line) > MAX_LINE and not is_link_line(line):  # a web address is never wrapped
                too_long.append((str(msg["Subject"]), len(line), line))
    assert boards > 0
    assert not too_long, "\n".join(f"{s}: {n}: {ln}" for s, n, ln in too_long[:20])

"""Exactly once through the mailbox (issue 43): a burst of mails put into a
real Dovecot while `pbm serve` is killed between the commit of mails it read
and their move to the done mailbox (PBM_FAILPOINT), or while Dovecot itself
is restarted: every mail is stored once, handled once and answered once,
and the mailbox ends with every one of them in pbm-done."""

from __future__ import annotations

import collections
import time

import pytest

from tests.harness import PbmServer, wait_until
from tests.imap.conftest import Players, mailbox_env
from tests.imap.dovecot import Dovecot


def burst(players: Players, n: int, start: int = 0) -> list[str]:
    """``n`` mails from ``n`` senders to the mailbox, each asking for the
    list of games, put in over one IMAP connection; their Message-IDs."""
    msgs = [players.build(f"p{i}@example.org", "pbm", "games", subject=f"burst {i}") for i in range(start, start + n)]
    players.box.append(*(m.as_bytes() for m in msgs))
    return [str(m["Message-ID"]) for m in msgs]


def assert_each_once(pbm: PbmServer, box: Dovecot, ids: list[str]) -> None:
    """Every mail of the burst stored once, handled, answered once; all in pbm-done."""
    wait_until(lambda: all(pbm.replies_to(m) for m in ids), timeout=120, what="a reply to every mail")
    pbm.settle(timeout=60)
    rows = pbm.sql("SELECT imap_uid, status FROM inbox WHERE imap_uid IS NOT NULL")
    uids = collections.Counter(uid for uid, _ in rows)
    assert len(rows) == len(ids) and max(uids.values()) == 1, uids.most_common(3)
    assert {status for _, status in rows} == {"done"}
    # a reply the relay took twice (a kill between its 250 and the mark) keeps its Message-ID: one answer
    answers = {m: {str(r["Message-ID"]) for r in pbm.replies_to(m)} for m in ids}
    assert all(len(a) == 1 for a in answers.values()), [m for m, a in answers.items() if len(a) != 1]
    assert box.count("INBOX") == 0 and box.count("pbm-done") == len(ids)


def _killed_between_commit_and_move(tmp_path, dovecot: Dovecot, n: int) -> None:
    env = mailbox_env(dovecot, PBM_FAILPOINT=f"sigkill-after-mailbox-commit:{n // 4}", PBM_SERVE_PROCESSES="1")
    pbm = PbmServer(tmp_path, extra_env=env, process=True)
    try:
        pbm.start()
        players = Players(pbm, dovecot)
        ids = burst(players, n)
        assert pbm.proc is not None
        pbm.proc.wait(timeout=120)  # the failpoint: SIGKILL after a commit, before the move
        assert (tmp_path / "failpoint-fired").exists()
        stored = pbm.sql("SELECT count(*) FROM inbox WHERE imap_uid IS NOT NULL")[0][0]
        # the mails of the last commit are stored and still in INBOX: not moved
        assert 0 < stored <= n and dovecot.count("INBOX") > n - stored
        pbm.start()
        assert_each_once(pbm, dovecot, ids)
        assert "stored before were only moved" in pbm.serve_log()
    finally:
        pbm.close()


@pytest.mark.process
def test_a_kill_between_commit_and_move_handles_each_mail_once(tmp_path, dovecot: Dovecot):
    _killed_between_commit_and_move(tmp_path, dovecot, 40)


@pytest.mark.process
@pytest.mark.heavy
def test_a_kill_during_a_burst_of_200(tmp_path, dovecot: Dovecot):
    _killed_between_commit_and_move(tmp_path, dovecot, 200)


def test_dovecot_restarted_mid_burst_loses_nothing_and_tells_the_gm_once(pbm_mailbox: PbmServer, dovecot: Dovecot,
                                                                       players: Players):
    pbm = pbm_mailbox
    ids = burst(players, 15)
    wait_until(lambda: pbm.sql("SELECT count(*) FROM inbox WHERE imap_uid IS NOT NULL")[0][0] >= 3,
               what="part of the burst stored")
    dovecot.stop()
    wait_until(lambda: "cannot be read" in "".join(str(m["Subject"]) for m in pbm.inbox(pbm.gm_address)),
               what="the GM told")
    time.sleep(1.5)  # the reader tries again meanwhile (1 s, then 2 s): still one log line, one notice
    dovecot.start()
    ids += burst(players, 15, start=15)
    assert_each_once(pbm, dovecot, ids)
    log = pbm.serve_log()
    assert log.count("new mail waits in the mailbox") == 1, log[-3000:]
    assert "is read again" in log
    notices = [m for m in pbm.inbox(pbm.gm_address) if "mailbox" in str(m["Subject"])]
    assert len(notices) == 1, [str(m["Subject"]) for m in notices]
    status = pbm.cli("mail", "status").stdout
    assert "FAILING" not in status and "last read" in status


def test_without_move_only_our_mails_are_expunged(pbm_mailbox: PbmServer, dovecot: Dovecot, players: Players):
    """On a server without MOVE the reader copies, flags and expunges by UID
    (UIDPLUS): a stranger's mail someone else flagged \\Deleted stays."""
    pbm = pbm_mailbox
    assert pbm.server is not None and pbm.server.mailbox is not None
    pbm.server.mailbox.use_move = False
    dovecot.append(pbm.build("x@else.example", "someone@else.example", "hi", "not ours").as_bytes())
    conn = dovecot.connect()
    try:
        conn.select("INBOX")
        conn.store("1", "+FLAGS", r"(\Deleted)")  # flagged by another client, not expunged
    finally:
        conn.logout()
    ids = burst(players, 3)
    wait_until(lambda: all(pbm.replies_to(m) for m in ids), what="a reply to every mail")
    wait_until(lambda: dovecot.count("pbm-done") == 3, what="our mails in pbm-done")
    assert dovecot.subjects("INBOX") == ["not ours"]

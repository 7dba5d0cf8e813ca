"""Press: players' messages to each other, relayed by the server.

In a mail to NAME@DOMAIN (with the sender's ``$$password$$``)::

    PRESS TO bob carol          (or: PRESS TO ALL)
    the message, as many lines as it takes
    ENDPRESS

:func:`extract` takes the blocks out of a mail's body before its command
lines are read (a block's lines are never orders; the body keeps its line
numbers, the blocks' lines become blank).  :func:`relay` runs in the mail's
write transaction: it checks each block against the game (press on, off or
broadcast only; who plays; the sender's hourly limit), puts one mail per
recipient and a copy for the game master in the outbox, and records the
message in the ``press`` table.  The recipients never see the sender's
address (the mail comes from NAME@DOMAIN), and in an anonymous game not the
sender's handle either.  See docs/players.md and docs/gm.md.

A relayed message is framed so that it cannot pass for the server's own text:
every line of it starts with ``press|`` (replies.PRESS_MARK), a mark no line
of a player's mail is ever read past (replies.classify takes such a line for
a quote), so a ``----- end of message -----`` or a fake instruction inside
stays visibly inside, and an order planted in press and pasted back without
``> `` is never run.  The framed text is rendered and masked once per press,
not once per recipient.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from games.base import Actor, Line, Result
from pbm_server.base.settings import Settings
from pbm_server.mail.bounces import held_among
from pbm_server.mail.compose import MAX_LINE, Composer, Rendered, redact, thread_root
from pbm_server.mail.mailtext import MAX_LINE_CHARS, PASSWORD_RE, mask_unpaired
from pbm_server.mail.outbound import enqueue
from pbm_server.mail.replies import MAX_SCAN_LINES, OWN, PRESS_MARK, SentMail, classify
from pbm_server.play import streams
from pbm_server.store.lookup import account_by_handle, audit
from pbm_server.store.models import Account, Game, Press

#: a game's press settings (``game set NAME press=...``)
MODES = ("on", "off", "broadcast")
#: the longest message relayed (characters)
MAX_PRESS_CHARS = 20_000
#: blocks of one mail looked for with a fresh reading of the body; later ones
#: are still taken out (never read as orders), with the last reading
MAX_CAREFUL_BLOCKS = 20
#: at most this many blocks of one mail are answered; the rest of the mail is not read
MAX_BLOCKS = 50
#: a PRESS TO line is read up to this many characters (as command lines are)
MAX_HEADER_CHARS = MAX_LINE_CHARS
#: at most this many handles are named in a refusal ("accepted: ...")
MAX_NAMED = 40
#: a framed press line is at most this long (compose.fit_lines wraps longer ones
#: without the mark): longer lines of the message are wrapped here, each piece marked
FRAMED_WIDTH = MAX_LINE
#: outbox kinds: the relayed message, the game master's copy
KIND_PRESS = "press"
KIND_GM_COPY = "gm-press"

_START = re.compile(r"^\s*press\s+to(\s|$)", re.I)
_PRESS_WORD = re.compile(r"^\s*press(\s|$)", re.I)
_END = re.compile(r"^\s*endpress\s*$", re.I)
#: does the body hold anything that may be press at all (most mails do not)
_ANY = re.compile(r"^[ \t>|]*(press|endpress)\b", re.I | re.M)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass
class PressBlock:
    """One ``PRESS TO ... ENDPRESS`` block of a mail (or a line that looks
    like one and is not)."""

    #: line number of the PRESS TO line in the body (1-based)
    start: int
    #: the PRESS TO line as written, passwords taken out
    header: str
    handles: list[str] = field(default_factory=list)
    to_all: bool = False
    #: the message lines as written
    body: list[str] = field(default_factory=list)
    #: why the block is not sent, whatever the game says (None: fine so far)
    error: str | None = None

    @property
    def line(self) -> Line:
        return Line(self.start, self.header)

    @property
    def text(self) -> str:
        return "\n".join(self.body)


def _lines(body: str) -> list[str]:
    # numbered exactly as replies.classify and mailtext.command_lines number them
    return body.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _header(text: str, number: int) -> PressBlock:
    """The PRESS TO line read: its handles or ALL."""
    bare = " ".join(PASSWORD_RE.sub(" ", _CONTROL.sub(" ", text)).split())[:MAX_HEADER_CHARS]
    block = PressBlock(number, bare)
    words = [w for w in re.split(r"[\s,;]+", bare)[2:] if w]
    if not words:
        block.error = "PRESS TO names nobody: expected PRESS TO <handle> [<handle> ...] or PRESS TO ALL"
    elif any(w.lower() == "all" for w in words):
        block.to_all = True
    else:
        block.handles = list(dict.fromkeys(words))
    return block


def extract(body: str, sent: Sequence[SentMail] = (), domain: str | None = None) -> tuple[str, list[PressBlock], list[str]]:
    """Take the press blocks out of ``body``.

    Returns the body with each block's lines (PRESS TO and ENDPRESS included)
    made blank, the blocks in order, and the ``$$passwords$$`` written inside
    them (they count as the mail's password; they are never relayed).

    A block starts at a line of the sender's own (not a quote, not the
    signature: replies.classify) that begins ``PRESS TO`` and ends at the next
    line that is ``ENDPRESS``.  Between them, everything is the message as
    written.  A block without its ENDPRESS (the mail ends, or another PRESS TO
    line comes first) is refused and its lines are not read as orders; a
    PRESS line without TO and an ENDPRESS without a block are refused too."""
    blocks: list[PressBlock] = []
    passwords: list[str] = []
    if not _ANY.search(body):
        return body, blocks, passwords
    lines = _lines(body)
    states = classify("\n".join(lines), sent, domain)
    i = 0
    while i < min(len(lines), MAX_SCAN_LINES):
        state, text = states[i]
        if state != OWN or not (_PRESS_WORD.match(text) or _END.match(text)):
            i += 1
            continue
        number = i + 1
        if len(blocks) >= MAX_BLOCKS:
            blocks.append(_too_many(number, text))
            _blank(lines, i, len(lines))
            break
        passwords.extend(_passwords_in(text))
        stray = _stray_line(number, text)
        if stray is not None:
            blocks.append(stray)
            lines[i] = ""
            i += 1
            continue
        block, end = _block_at(lines, i, text)
        for raw in block.body:
            passwords.extend(_passwords_in(raw))
        _blank(lines, i, end)
        blocks.append(block)
        i = end
        if len(blocks) <= MAX_CAREFUL_BLOCKS and i < len(lines):
            # read the rest afresh: the message's own lines (a "-- ", a
            # "wrote:") must not change how the lines after it are read
            states = classify("\n".join(lines), sent, domain)
    return "\n".join(lines), blocks, passwords


def _passwords_in(text: str) -> list[str]:
    """The ``$$passwords$$`` written in one line."""
    return [p.strip() for p in PASSWORD_RE.findall(text) if p.strip()]


def _blank(lines: list[str], start: int, end: int) -> None:
    """Make ``lines[start:end]`` blank (an ``end`` past the last line: up to it)."""
    for k in range(start, min(end, len(lines))):
        lines[k] = ""


def _too_many(number: int, text: str) -> PressBlock:
    """The refusal of the block at line ``number`` past MAX_BLOCKS."""
    return PressBlock(number, " ".join(_CONTROL.sub(" ", text).split())[:MAX_HEADER_CHARS],
                      error=f"more than {MAX_BLOCKS} press blocks in one mail: nothing from here on "
                            f"was read; send the others in another mail")


def _stray_line(number: int, text: str) -> PressBlock | None:
    """The refusal of a line that starts no block (an ENDPRESS without a
    block, a PRESS without TO); None for a PRESS TO line."""
    if _END.match(text):
        return PressBlock(number, text.strip(), error="ENDPRESS without a PRESS TO line before it")
    if not _START.match(PASSWORD_RE.sub(" ", text)):
        return PressBlock(number, " ".join(PASSWORD_RE.sub(" ", text).split())[:MAX_HEADER_CHARS],
                          error="expected PRESS TO <handle> [<handle> ...] or PRESS TO ALL, then the "
                                "message lines, then a line ENDPRESS")
    return None


def _block_at(lines: list[str], i: int, text: str) -> tuple[PressBlock, int]:
    """The block whose PRESS TO line (``text``) is ``lines[i]``, and the index
    of the first line after it (after its ENDPRESS; at the next PRESS TO or
    past the end if it has none, and then it is refused)."""
    number = i + 1
    block = _header(text, number)
    j = i + 1
    while j < len(lines) and not _END.match(lines[j]) and not _START.match(lines[j]):
        j += 1
    block.body = lines[i + 1 : j]
    if j >= len(lines):
        if block.error is None:
            block.error = (f"this press block (begun at line {number}) has no ENDPRESS line: nothing was sent, and "
                           f"the lines after line {number} were not read; end the message with a line ENDPRESS")
        return block, len(lines)
    if _START.match(lines[j]):
        if block.error is None:
            block.error = (f"this press block (begun at line {number}) has no ENDPRESS line before the next PRESS TO "
                           f"at line {j + 1}: nothing was sent; end each message with a line ENDPRESS")
        return block, j  # the next block starts there
    return block, j + 1


def message_text(block: PressBlock, sender_addr: str) -> str:
    """The message as relayed: the sender's lines as written, blank lines at
    its start and end aside; control characters become spaces, a ``$$``
    without its partner is masked (a password may follow it), and the
    sender's own address, wherever it appears, is withheld."""
    lines = [_CONTROL.sub(" ", ln) for ln in block.body]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    text = "\n".join(mask_unpaired(ln) if "$$" in PASSWORD_RE.sub(" ", ln) else ln for ln in lines)
    if sender_addr:
        text = re.sub(re.escape(sender_addr), "(address withheld)", text, flags=re.I)
    return text


def framed(text: str) -> str:
    """``text`` as it is shown to its recipients: every line marked with
    PRESS_MARK (a long line wrapped, every piece marked)."""
    width = FRAMED_WIDTH - len(PRESS_MARK) - 1
    out: list[str] = []
    for line in text.split("\n"):
        pieces = [line] if len(line) <= width else textwrap.wrap(
            line, width=width, subsequent_indent="  ", break_long_words=True, break_on_hyphens=False,
            drop_whitespace=True) or [""]
        out.extend(f"{PRESS_MARK} {piece}" if piece.strip() else PRESS_MARK for piece in pieces)
    return "\n".join(out)


def _names(handles: Sequence[str]) -> str:
    shown = list(handles[:MAX_NAMED])
    more = len(handles) - len(shown)
    text = ", ".join(shown) if shown else "(none)"
    return text + (f" and {more} more" if more > 0 else "")


def _and(handles: Sequence[str]) -> str:
    if len(handles) <= 1:
        return "".join(handles)
    return ", ".join(handles[:-1]) + " and " + handles[-1]


def _held_words(handles: Sequence[str]) -> str:
    """Why press does not go to ``handles``: their addresses are on hold
    (bounces.py); the message is not kept for them."""
    one = len(handles) == 1
    return (f"{_and(handles)}'s mail is held" if one else f"the mail of {_and(handles)} is held") + (
        f": mail to {'that address' if one else 'their addresses'} bounced repeatedly, so the server sends "
        f"{'it' if one else 'them'} nothing until a mail comes from {'it' if one else 'each'} again, and this "
        "message is not kept to be sent later")


def board_names(game: Game, players: dict[str, str]) -> dict[str, str]:
    """The names a game's players go by on its board, lower case -> handle:
    in rmpm each player's two-character ABBR and one-word alias, which the
    reports show and players write to each other by (``PRESS TO al``).  A
    name that is also a handle, or that two players share, is left out: a
    handle always means its player."""
    if game.kind != "rmpm":
        return {}
    names: dict[str, str] = {}
    shared: set[str] = set()
    found = (game.state or {}).get("players")
    for handle, p in (found.items() if isinstance(found, dict) else ()):
        handle = players.get(str(handle).lower())
        if handle is None or not isinstance(p, dict):
            continue
        for name in (str(p.get("abbr") or ""), str(p.get("alias") or "")):
            key = name.lower()
            if not key or " " in key or key in players:
                continue
            if names.get(key, handle) != handle:
                shared.add(key)
            names[key] = handle
    return {k: v for k, v in names.items() if k not in shared}


class Relay:
    """The press blocks of one mail to one game, in its write transaction."""

    def __init__(self, session: Session, composer: Composer, settings: Settings, game: Game, players: Sequence[str],
                 sender: Actor, now: datetime, inbound_id: int | None, secrets: AbstractSet[str] = frozenset()):
        self.s = session
        self.composer = composer
        self.settings = settings
        self.game = game
        self.players = {p.lower(): p for p in players}
        #: the names players go by on the board (rmpm's ABBR and one-word alias), lower case -> the handle
        self.board_names = board_names(game, self.players)
        #: a recipient named by the board name the sender wrote: the reply names them so
        self.called: dict[str, str] = {}
        self.sender = sender
        self.now = now
        self.inbound_id = inbound_id
        self.secrets = set(secrets)
        self.used_this_mail = 0
        #: the last body rendered (its key and the body): the same for every recipient
        self._rendered: tuple[tuple[int, str, str, bool, bool], Rendered] | None = None
        self._links: streams.LinkMaker | None = None

    # -- checks -------------------------------------------------------------------
    def _sender_refusal(self) -> str | None:
        who = self.sender
        if who.is_gm:
            return None
        if who.handle is None:
            return (f"no account is registered for {who.email}: only the players of {self.game.name} can send press "
                    f"there; nothing was sent")
        if not who.authenticated:
            return "press needs your password: put $$yourpassword$$ anywhere in the mail; nothing was sent"
        if who.handle.lower() not in self.players:
            return f"you are not a player of {self.game.name}: only its players can send press there; nothing was sent"
        if self.game.press_mode == "off":
            return f"the game master has turned press off in {self.game.name}; nothing was sent"
        return None

    def _others(self) -> list[str]:
        me = (self.sender.handle or "").lower()
        return sorted((h for k, h in self.players.items() if k != me), key=str.lower)

    def _accepted(self) -> str:
        others = self._others()
        if self.game.press_mode == "broadcast" and not self.sender.is_gm:
            return "accepted here: PRESS TO ALL"
        return f"accepted here: ALL, or handles of the players of {self.game.name}: {_names(others)}"

    def _recipients(self, block: PressBlock) -> tuple[list[str], str | None]:
        """The handles the block goes to, or why it cannot go."""
        me = (self.sender.handle or "").lower()
        if block.to_all:
            others = self._others()
            if not others:
                return [], f"{self.game.name} has no other players yet; nothing was sent"
            return others, None
        if self.game.press_mode == "broadcast" and not self.sender.is_gm:
            return [], (f"{self.game.name} takes broadcast press only: write PRESS TO ALL (the game master has set "
                        f"press=broadcast); nothing was sent")
        found: list[str] = []
        for h in block.handles:
            key = h.lower()
            if key not in self.players and key in self.board_names:  # PRESS TO al: the player whose ABBR is al
                self.called.setdefault(self.board_names[key], h)
                key = self.board_names[key].lower()
            if key in self.players:
                if key != me and self.players[key] not in found:
                    found.append(self.players[key])
                continue
            # the same answer for a handle nobody has and one that plays
            # elsewhere: press is no way to find out who has an account
            return [], f"there is no player called {h!r} in {self.game.name}; nothing was sent; {self._accepted()}"
        if not found:
            return [], f"you named only yourself; nothing was sent; {self._accepted()}"
        return found, None

    def _over_limit(self, count: int) -> str | None:
        if self.sender.is_gm or self.sender.handle is None:
            return None
        since = self.now - timedelta(hours=1)
        used = self.s.scalar(select(func.coalesce(func.sum(Press.recipient_count), 0))
                             .where(Press.sender == self.sender.handle, Press.sent_at >= since)) or 0
        limit = self.settings.press_per_hour
        if used + count > limit:
            return (f"too much press: you have had {used} press mails relayed in the last hour and this message would "
                    f"make {count} more, beyond the limit of {limit} an hour; nothing was sent; try again later")
        return None

    # -- sending ------------------------------------------------------------------
    def run(self, blocks: Sequence[PressBlock]) -> list[Result]:
        refusal = self._sender_refusal()
        results = []
        for block in blocks:
            if block.error is not None:
                results.append(Result(block.line, False, block.error))
            elif refusal is not None:
                results.append(Result(block.line, False, refusal))
            else:
                results.append(self._one(block))
        return results

    def _one(self, block: PressBlock) -> Result:
        """One PRESS block: checked, sent to each recipient whose mail is not
        held (and a copy to the GM), recorded; the line's answer."""
        text = message_text(block, self.sender.email)
        why = self._bad_text(text)
        if why is None:
            recipients, why = self._recipients(block)
        if why is not None:
            return Result(block.line, False, why)
        to, held = self._not_held(recipients)
        if held and len(held) == len(recipients):
            return Result(block.line, False, f"{_held_words(held)}; nothing was sent")
        recipients = [h for h in recipients if h not in held]
        why = self._over_limit(len(recipients))
        if why is not None:
            return Result(block.line, False, why)
        sender = "the game master" if self.sender.is_gm else (self.sender.handle or "")
        anonymous = self.game.press_anonymous and not self.sender.is_gm
        # framed and masked once for all its recipients (600 $$ marks to 300
        # players were 180,000 maskings of the whole text)
        shown = framed(text)
        stops = streams.stopped(self.s, "press", self.game.id)
        quiet = [acc.handle for acc in to if acc.email.lower() in stops]
        for acc in to:
            if acc.email.lower() not in stops:
                self._mail(acc.email, acc.handle, recipients, block.to_all, shown, sender, anonymous, gm_copy=False,
                           account=acc)
        if self.settings.gm_address and not self.sender.is_gm:
            self._mail(self.settings.gm_address, "game master", recipients, block.to_all, shown, sender, anonymous,
                       gm_copy=True)
        public = block.to_all and self.game.public_press
        self._record(block, recipients, text, sender, anonymous, public)
        said = self._sent_words(block, recipients, held, anonymous, public, quiet)
        return Result(block.line, True, said)

    def _not_held(self, handles: list[str]) -> tuple[list[Account], list[str]]:
        """The accounts of ``handles`` whose mail is not held (bounces.py), in
        order, and the handles whose mail is."""
        accounts = [a for a in (account_by_handle(self.s, h) for h in handles) if a is not None]
        on_hold = held_among(self.s, [a.email for a in accounts])
        held_keys = {a.handle_key for a in accounts if a.email.lower() in on_hold}
        return ([a for a in accounts if a.handle_key not in held_keys],
                [h for h in handles if h.lower() in held_keys])

    @staticmethod
    def _bad_text(text: str) -> str | None:
        """Why a message cannot be sent as it is (None: it can)."""
        if not text.strip():
            return "the message is empty: write it between the PRESS TO line and ENDPRESS; nothing was sent"
        if len(text) > MAX_PRESS_CHARS:
            return (f"the message has {len(text)} characters, more than the {MAX_PRESS_CHARS} "
                    "a press message may have; nothing was sent")
        return None

    def _record(self, block: PressBlock, recipients: list[str], text: str, sender: str, anonymous: bool,
                public: bool) -> None:
        """The press row (its text as relayed: the mail's passwords masked) and its audit line."""
        game = self.game
        self.s.add(Press(game_id=game.id, sender="gm" if self.sender.is_gm else sender, recipients=list(recipients),
                         recipient_count=0 if self.sender.is_gm else len(recipients), to_all=block.to_all,
                         anonymous=anonymous, body=redact(text, self.secrets), public=public, sent_at=self.now,
                         inbound_id=self.inbound_id))
        audit(self.s, self.now, "gm" if self.sender.is_gm else sender, "press",
              f"{game.name}: to {'ALL' if block.to_all else ' '.join(recipients)} ({len(text.splitlines())} lines)", game)

    def _sent_words(self, block: PressBlock, recipients: list[str], held: list[str], anonymous: bool,
                    public: bool = False, quiet: Sequence[str] = ()) -> str:
        """What the sender is told of a press that went out: who it was mailed
        to, and who not and why (``quiet``: players who stopped its press mail)."""
        game = self.game
        stopped = {h.lower() for h in quiet}
        mailed = [self.called.get(h, h) for h in recipients if h.lower() not in stopped]
        quiet = [self.called.get(h, h) for h in quiet]
        if not mailed:
            said = "mailed to nobody"
        elif block.to_all and quiet:
            said = f"sent to the {len(mailed)} other players of {game.name} who get its press: {_names(mailed)}"
        elif block.to_all and held:
            said = f"sent to the {len(mailed)} other players of {game.name} whose mail is not held: {_names(mailed)}"
        elif block.to_all:
            said = f"sent to all {len(mailed)} other players of {game.name}: {_names(mailed)}"
        else:
            said = f"sent to {_and(mailed)}"
        if quiet:
            said += f"; not to {_and(quiet)}: {_and(quiet)} stopped press mail of {game.name}"
        if anonymous:
            said += " (anonymous press: they are not told who sent it)"
        if held:
            said += f"; not to {_and(held)}: {_held_words(held)}"
        if public:
            said += (f"; it is public: the game master has set public_press=on, so anyone can read it on the web "
                     f"page of {game.name}" + (" (without your handle)" if anonymous else ""))
        return said

    def _body(self, recipients: list[str], to_all: bool, text: str, sender: str, anonymous: bool,
              gm_copy: bool) -> Rendered:
        """The body of a press mail, the same for every recipient (the GM's
        copy aside): rendered and masked once per press."""
        key = (id(recipients), text, sender, anonymous, gm_copy)
        if self._rendered is not None and self._rendered[0] == key:
            return self._rendered[1]
        shown = sender if (gm_copy or not anonymous) else None
        body = self.composer.render("server/press.txt", {
            "game": self.game.name, "sender": shown, "anonymous": anonymous, "to_all": to_all,
            "recipients": recipients if len(recipients) <= MAX_NAMED else [],
            "count": len(recipients), "text": text, "gm_copy": gm_copy, "from_gm": sender == "the game master",
        })
        body = Rendered(redact(body.text, self.secrets), None if body.html is None else redact(body.html, self.secrets))
        self._rendered = (key, body)
        return body

    def _mail(self, to_addr: str, to_name: str, recipients: list[str], to_all: bool, text: str, sender: str,
              anonymous: bool, gm_copy: bool, account: Account | None = None) -> None:
        game = self.game
        shown = sender if (gm_copy or not anonymous) else None
        body = self._body(recipients, to_all, text, sender, anonymous, gm_copy)
        if gm_copy:
            subject = f"{game.name}: press from {sender} (copy for the game master)"
        elif shown:
            subject = f"{game.name}: press from {shown}"
        else:
            subject = f"{game.name}: anonymous press"
        from_name = f"{shown} ({game.name} press)" if shown and not gm_copy else f"{game.name} press"
        # the body is masked already: only what differs per mail is masked here
        # (a secret of the mail that is part of the recipient's handle or of the subject)
        rest = frozenset(x for x in self.secrets if x and (x in to_name or x in subject))
        stop = None
        if account is not None:  # a player's copy: one click stops the game's press for them
            if self._links is None:
                self._links = streams.LinkMaker(self.s, self.settings)
            stop = self._links.unsubscribe(account, "press", game.name, self.now)
            body = streams.with_links(body, stop, None, streams.STREAMS["press"], game.name)
        mid, raw = self.composer.message(
            to_addr=to_addr, to_name=to_name, from_local=game.name, from_name=from_name, subject=subject, body=body,
            auto="auto-generated", now=self.now, secrets=rest,
            thread=thread_root(self.settings.domain, game.name, game.id),  # press threads with the game's mail
            unsubscribe=stop.urls if stop is not None else None,
        )
        enqueue(self.s, to_addr=to_addr, message_id=mid, raw=raw, kind=KIND_GM_COPY if gm_copy else KIND_PRESS,
                now=self.now, inbound_id=self.inbound_id, game_id=game.id)


def refuse_elsewhere(blocks: Sequence[PressBlock], settings: Settings) -> list[Result]:
    """Press in a mail to pbm@DOMAIN: it belongs to a game's address."""
    return [Result(b.line, False, b.error or f"press goes to the game's address, NAME@{settings.domain} (e.g. "
                                            f"the game you play); nothing was sent")
            for b in blocks]


def listing(session: Session, game: Game, last: int | None = None) -> list[Press]:
    """The game's press, oldest first (the ``last`` newest when given)."""
    q = select(Press).where(Press.game_id == game.id).order_by(Press.id.desc())
    if last:
        q = q.limit(last)
    return list(reversed(session.scalars(q).all()))


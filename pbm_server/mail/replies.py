"""Which lines of a reply the player wrote now.

A reply holds the player's own lines and, above, below or between them, a
quote of the mail answered: marked with ``>`` (most clients), with a TAB
(mailx/s-nail), or not marked at all below a header block (Outlook, phone
clients).  The reader walks the lines once and classifies each:

1. quoted: starts with ``>`` (after optional blanks);
2. ours: the server knows what it sent.  The mails this one answers (its
   In-Reply-To / References, matched against the outbox's Message-IDs) are
   compared line by line, normalised (quote marks, case and runs of white
   space ignored).  A TAB- or ``|``-prefixed line that is a line of such a
   mail is quoted.  Unmarked lines are ours only as a run of at least two
   consecutive non-blank lines that reads, in order, as a stretch of our mail
   and holds at least one line of the server's own prose (a line of ours that
   is not an echo ``> ...`` or an indented line such as a held order): a
   player re-sending the commands or orders our mail echoed keeps them;
3. a quote header: an attribution line ("On ... wrote:", "Am ... schrieb
   ...:", "Le ... a écrit :", "El ... escribió:", "Den ... skrev ...:",
   "... kirjoitti:", "... пишет:", any line ending in ``:`` that names the
   answered mail's sender), possibly wrapped over two lines, hides itself and
   the quoted block after it; if unmarked text follows it directly (a client
   that does not mark its quotes), everything to the end is quote;
4. an Outlook-style header (a separator such as ``-----Original Message-----``
   or a line of underscores, or a ``From:``/``Von:``/``De :``/``Fra:``/
   ``Lähettäjä:``/``От:`` ... block of at least two header lines, or a header
   line naming the answered mail's sender): everything from there to the end
   is quote;
5. the signature: everything after a line ``-- `` (not quoted), and the
   device lines ("Sent from my iPhone", "Get Outlook for Android", ...).

Everything left, blank lines aside, is the player's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from email import policy
from email.parser import BytesParser
from email.utils import getaddresses

from sqlalchemy import select
from sqlalchemy.orm import Session

from pbm_server.mail.compose import written_out
from pbm_server.store.models import OutboundMail

#: only this many lines of a body are looked at with care (commands come
#: first; at most 300 are read anyway); the lines after them are read cheaply,
#: for a $$password$$ (own_lines)
MAX_SCAN_LINES = 2000
#: only this many of the mails named in References are looked up
MAX_REFERENCES = 20
#: only the first this many characters of a line are matched against the
#: patterns below (an attribution, a header line of a quote, a device line is
#: never longer); a hostile line of any length costs no more than this
MAX_PATTERN_CHARS = 1000

OWN, BLANK, QUOTE, SIG = "own", "blank", "quote", "sig"

#: the mark the server puts before every line of relayed press (play/press.py): a line
#: that starts with it was written by another player, so it is quoted text, never a
#: command of the mail it is in (whatever the References say)
PRESS_MARK = "press|"
_QUOTED = re.compile(r"^[ \t]*(>|" + re.escape(PRESS_MARK) + ")", re.I)
_MARKS = re.compile(r"^[\s>|]+")

#: attribution lines, one per client language; each ends with ":"
_ATTRIBUTION = re.compile(
    r"""(
        ^on\b.*\bwrote\s*:$                 # Gmail, Thunderbird, Apple Mail, mutt (en)
      | \bwrote\s*:$                        # s-nail/mailx "NAME wrote:", Yahoo
      | ^am\b.*\bschrieb\b.*:$              # de
      | \bschrieb\s*:$
      | \ba\s+[ée]crit\s*:$                 # fr
      | \bescribi[óo]\s*:$                  # es
      | \bescreveu\s*:$                     # pt
      | \bskrev\b.*:$                       # da, no, sv
      | \bkirjoitti\s*:$                    # fi
      | (пишет|написал[аи]?)\s*:$           # ru
      | \bha\s+scritto\s*:$                 # it
      | \bschreef\b.*:$                     # nl
      | \bnapisa[łl](\(a\))?\s*:$           # pl
      | ^\*\s.*\[\d{4}-\d\d-\d\d.*\]\s*:$   # old mutt: "* NAME <addr> [2026-11-23 14:53]:"
    )""",
    re.I | re.X,
)

#: separator lines above an unmarked quote (Outlook, Samsung, forwards)
_SEPARATOR = re.compile(
    r"""^\s*(
        _{10,}
      | -{2,}\s*(original\s+message|ursprüngliche\s+nachricht|message\s+d'origine|mensaje\s+original
          |oprindelig\s+meddelelse|opprinnelig\s+melding|ursprungligt\s+meddelande|alkuperäinen\s+viesti
          |исходное\s+сообщение|messaggio\s+originale|oorspronkelijk\s+bericht|wiadomość\s+oryginalna
          |forwarded\s+message|weitergeleitete\s+nachricht|message\s+transféré|mensaje\s+reenviado)\s*-{2,}
    )\s*$""",
    re.I | re.X,
)

#: "Key: value" header lines of an unmarked quote (French puts a space before the colon)
#: (possessive quantifiers: the runs of spaces and stars never give back what
#: they took, which made a line of 64,000 spaces cost 48 s)
_HEADER_LINE = re.compile(r"^\s*+\**+\s*+([^\W\d_][^\W_]*+(?:\s[^\W\d_][^\W_]*+)?)\s*+\**+\s*+:\s*(.*)$")
_FROM_KEYS = {
    "from", "von", "de", "fra", "från", "lähettäjä", "от", "od", "van", "da", "mittente",
    "remitente", "expéditeur", "afzender", "avsändare", "feladó",
}
_OTHER_KEYS = {
    "sent", "date", "to", "cc", "subject", "reply to",
    "gesendet", "datum", "an", "betreff", "kopie",
    "envoyé", "à", "objet", "date d'envoi",
    "enviado", "fecha", "para", "asunto", "enviado el",
    "sendt", "dato", "til", "emne", "kopi",
    "skickat", "till", "ämne",
    "lähetetty", "päivämäärä", "vastaanottaja", "aihe", "kopio",
    "отправлено", "дата", "кому", "тема", "копия",
    "wysłane", "do", "temat", "verzonden", "aan", "onderwerp", "inviato", "a", "oggetto",
}

#: what phones and webmail put under the text
_DEVICE_LINE = re.compile(
    r"""^\s*(
        sent\s+(from|with|via)\s+(my\s+)?\S.*
      | get\s+outlook\s+for\s+\S+
      | gesendet\s+(von|mit)\s+\S.*
      | von\s+meinem\s+\S+(\s+\S+)?\s+gesendet\.?
      | envoy[ée]\s+(de|depuis)\s+\S.*
      | enviado\s+(desde|de)\s+\S.*
      | sendt\s+fra\s+\S.*
      | skickat\s+från\s+\S.*
      | lähetetty\s+\S+(sta|stä|lla|llä)\.?
      | отправлено\s+(с|из)\s+\S.*
    )\s*$""",
    re.I | re.X,
)
_DEVICE_MAX_CHARS = 60
#: an attribution wrapped over two lines: a long first line, a short tail
_WRAPPED_MIN_CHARS = 50
_WRAP_TAIL_MAX_CHARS = 40
#: mail-parser-reply's attribution patterns: lines up to this long, this many per mail
_LIB_MAX_CHARS = 160
_LIB_MAX_TRIES = 40


def _library_patterns() -> tuple[list[re.Pattern[str]], list[re.Pattern[str]], re.Pattern[str] | None]:
    """mail-parser-reply's per-language tables (cs, it, ja, ko, nl, pl, sv, zh
    and more besides ours): attribution lines, Outlook header blocks and
    device lines.  Used as a second opinion; without them our own table stands."""
    try:
        from mailparser_reply.constants import MAIL_LANGUAGES  # type: ignore[import-untyped]
    except Exception:  # an incompatible version: our own patterns suffice
        return [], [], None
    wrote: list[re.Pattern[str]] = []
    headers: list[re.Pattern[str]] = []
    sent_from: list[str] = []
    for lang, table in MAIL_LANGUAGES.items():
        if len(lang) != 2:  # not a language (the package keeps test entries here too)
            continue
        for key, out in (("wrote_header", wrote), ("from_header", headers)):
            try:
                if table.get(key):
                    out.append(re.compile(table[key], re.I | re.M))
            except re.error:
                pass
        if table.get("sent_from"):
            sent_from.append(table["sent_from"])
    try:
        device = re.compile(r"^\s*(?:" + "|".join(sent_from) + r")", re.I) if sent_from else None
    except re.error:
        device = None
    return wrote, headers, device


_LIB_WROTE, _LIB_HEADERS, _LIB_DEVICE = _library_patterns()


def normalise(line: str) -> str:
    """A line as compared with our mails: no quote marks, one space, no case."""
    return " ".join(_MARKS.sub("", line).split()).casefold()


@dataclass
class SentMail:
    """A mail the server sent, as the reader needs it."""

    lines: list[str]  # its text lines (the plain-text part, CRLF undone)
    names: set[str] = field(default_factory=set)  # its From address and display name, lower-case

    @classmethod
    def from_raw(cls, raw: bytes) -> "SentMail | None":
        try:
            msg = BytesParser(policy=policy.default).parsebytes(raw)
            part = msg.get_body(preferencelist=("plain",))
            text = part.get_content() if part is not None else ""
            names: set[str] = set()
            for name, addr in getaddresses([str(msg.get("From", ""))]):
                names.update(x.strip().lower() for x in (name, addr) if x and x.strip())
        except Exception:
            return None
        return cls(text.replace("\r\n", "\n").split("\n"), names)


class _Known:
    """The normalised text of our mails, for run matching."""

    def __init__(self, sent: Sequence[SentMail]):
        self.whole: set[str] = set()  # every normalised line
        self.prose: set[str] = set()  # lines of the server's own wording
        self.texts: list[str] = []  # each mail as " line line ... "
        for mail in sent:
            norm = []
            for raw in mail.lines:
                n = normalise(raw)
                if not n:
                    continue
                norm.append(n)
                self.whole.add(n)
                if raw[:1] not in (" ", "\t", ">") and n not in ("--",):
                    self.prose.add(n)
            self.texts.append(" " + " ".join(norm) + " ")

    def run_in_order(self, norms: list[str]) -> bool:
        probe = " " + " ".join(norms) + " "
        return any(probe in text for text in self.texts)


def sent_mails(session: Session, references: list[str]) -> list[SentMail]:
    """Our outbox rows whose Message-ID the mail names (In-Reply-To / References)."""
    wanted = list(dict.fromkeys(references))[-MAX_REFERENCES:]
    if not wanted:
        return []
    rows = session.scalars(select(OutboundMail.raw).where(OutboundMail.message_id.in_(wanted))).all()
    return [m for m in (SentMail.from_raw(written_out(bytes(raw))) for raw in rows) if m is not None]


def _names(sent: Sequence[SentMail], domain: str | None) -> set[str]:
    names: set[str] = set()
    for mail in sent:
        names.update(n for n in mail.names if len(n) >= 3)
    if domain:
        names.add("@" + domain.lower())
    return names


def _names_us(line: str, names: set[str]) -> bool:
    low = line.lower()
    return any(n in low for n in names)


def _is_attribution(text: str, names: set[str], budget: list[int]) -> bool:
    """``budget``: how many more lines mail-parser-reply's patterns may try
    (they backtrack on long lines; a hostile mail must not make us crawl)."""
    text = " ".join(text.split())
    if len(text) > 300 or not text.endswith((":", "\uff1a")):
        return False
    if _ATTRIBUTION.search(text) or _names_us(text, names):
        return True
    if len(text) > _LIB_MAX_CHARS or budget[0] <= 0:
        return False
    budget[0] -= 1
    return any(p.fullmatch(text) for p in _LIB_WROTE)


def _header_key(line: str) -> tuple[str, str] | None:
    m = _HEADER_LINE.match(line)
    if not m:
        return None
    return m.group(1).strip().casefold(), m.group(2)


def _outlook_header_at(lines: list[str], state: list[str], i: int, names: set[str]) -> bool:
    if _SEPARATOR.match(lines[i]):
        return True
    if _LIB_HEADERS and ("@" in lines[i] or _names_us(lines[i], names)):
        window = "\n".join(lines[i : i + 5])
        if any(p.match(window) for p in _LIB_HEADERS):
            return True
    head = _header_key(lines[i])
    if head is None:
        return False
    key, value = head
    if _names_us(value, names):
        return True  # "Od: pbm-server <pbm@DOMAIN>", whatever the language
    if key not in _FROM_KEYS or not ("@" in value or _names_us(value, names)):
        return False
    nxt = i + 1
    while nxt < len(lines) and state[nxt] == BLANK and nxt - i <= 1:
        nxt += 1
    follow = _header_key(lines[nxt]) if nxt < len(lines) else None
    return follow is not None and (follow[0] in _OTHER_KEYS or follow[0] in _FROM_KEYS)


def _mark_ours(lines: list[str], state: list[str], known: _Known) -> None:
    """Lines of the answered mails that the client did not mark with ``>``."""
    cands = [i for i, s in enumerate(state) if s == OWN]
    norms = {i: normalise(lines[i]) for i in cands}
    _mark_prefixed(lines, state, cands, norms, known)
    # runs of >= 2 lines that read as a stretch of our mail; lines the client
    # marked with ">" may sit in the run (our mail's own "> " echo lines)
    seq = [i for i, st in enumerate(state) if st in (OWN, QUOTE)]
    norms.update({i: normalise(lines[i]) for i in seq if i not in norms})
    k = 0
    while k < len(seq):
        j = _run_end(seq, k, state, norms, known)
        run = seq[k : j + 1]
        unmarked = [c for c in run if state[c] == OWN]
        if len(run) >= 2 and any(norms[c] in known.prose for c in unmarked):
            for c in unmarked:
                state[c] = QUOTE
            k = j + 1
        else:
            k += 1


def _mark_prefixed(lines: list[str], state: list[str], cands: list[int], norms: dict[int, str], known: _Known) -> None:
    """Single prefixed lines (TAB, ``|``) that are lines of ours become quote."""
    for i in cands:
        if lines[i][:1] in ("\t", "|") and norms[i] in known.whole:
            state[i] = QUOTE


def _run_end(seq: list[int], k: int, state: list[str], norms: dict[int, str], known: _Known) -> int:
    """The last index into ``seq`` of the run starting at ``seq[k]``: lines
    with only blank lines between them that read, in order, as our mail."""
    j = k
    while (
        j + 1 < len(seq)
        and all(state[x] == BLANK for x in range(seq[j] + 1, seq[j + 1]))
        and known.run_in_order([norms[c] for c in seq[k : j + 2]])
    ):
        j += 1
    return j


def classify(body: str, sent: Sequence[SentMail] = (), domain: str | None = None) -> list[tuple[str, str]]:
    """(state, line) for each of the first MAX_SCAN_LINES lines of ``body``:
    own, blank, quote or sig.  The patterns see each line's first
    MAX_PATTERN_CHARS characters only."""
    return _classify(body.replace("\r\n", "\n").replace("\r", "\n").split("\n"), sent, domain)[0]


def _classify(whole: list[str], sent: Sequence[SentMail], domain: str | None) -> tuple[list[tuple[str, str]], bool]:
    """:func:`classify` of the lines ``whole``, and whether the lines after
    the first MAX_SCAN_LINES may still be the player's (no quote or signature
    took the rest of the mail)."""
    whole = whole[:MAX_SCAN_LINES]
    state = [BLANK if not ln.strip() else QUOTE if _QUOTED.match(ln) else OWN for ln in whole]
    lines = [ln[:MAX_PATTERN_CHARS] for ln in whole]
    open_end = _mark_states(lines, state, sent, domain)
    return list(zip(state, whole, strict=True)), open_end


def _tail(lines: list[str], start: int) -> list[tuple[int, str]]:
    """(number, line) of the player's lines after the first MAX_SCAN_LINES,
    read cheaply (a mail is bounded by its size, not by its lines): a quoted
    line is left out, and a signature line, a separator or an attribution
    ends the player's text."""
    out: list[tuple[int, str]] = []
    for i in range(start, len(lines)):
        line = lines[i]
        if not line.strip() or _QUOTED.match(line):
            continue
        if line.rstrip() == "--" or _SEPARATOR.match(line[:MAX_PATTERN_CHARS]):
            break
        head = line[:MAX_PATTERN_CHARS].strip()
        if len(head) <= 300 and head.endswith(":") and _ATTRIBUTION.search(head):
            break
        out.append((i + 1, line))
    return out


def _mark_states(lines: list[str], state: list[str], sent: Sequence[SentMail], domain: str | None) -> bool:
    """Mark quotes, attributions, signatures and device lines in ``state``;
    False if a quote or the signature runs to the end of ``lines``."""
    n = len(lines)
    names = _names(sent, domain)
    if sent:
        _mark_ours(lines, state, _Known(sent))
    budget = [_LIB_MAX_TRIES]
    i = 0
    while i < n:
        if state[i] != OWN:
            i += 1
            continue
        line = lines[i]
        if _outlook_header_at(lines, state, i, names):
            _mark_rest(state, i, QUOTE)
            return False
        span = _attribution_span(lines, state, i, names, budget)
        if span:
            for x in range(i, i + span):
                state[x] = QUOTE
            i = _quote_after_attribution(lines, state, i + span)
            if i >= n:
                return False
            continue
        if line.rstrip() == "--":
            _mark_rest(state, i, SIG)
            return False
        if _is_device_line(line):
            state[i] = SIG
        i += 1
    return True


def _mark_rest(state: list[str], start: int, mark: str) -> None:
    """Every line from ``start`` to the end that is not blank becomes ``mark``."""
    for x in range(start, len(state)):
        if state[x] != BLANK:
            state[x] = mark


def _attribution_span(lines: list[str], state: list[str], i: int, names: set[str], budget: list[int]) -> int:
    """How many lines the attribution at ``lines[i]`` takes: 1, 2 (wrapped)
    or 0 (none there)."""
    line = lines[i]
    if _is_attribution(line, names, budget):
        return 1
    if (
        i + 1 < len(lines)
        and state[i + 1] == OWN
        and len(line.strip()) >= _WRAPPED_MIN_CHARS
        and len(lines[i + 1].strip()) <= _WRAP_TAIL_MAX_CHARS
        and _is_attribution(line + " " + lines[i + 1], names, budget)
    ):
        return 2  # a long attribution the client wrapped (Gmail does at 78 characters)
    return 0


def _quote_after_attribution(lines: list[str], state: list[str], j: int) -> int:
    """Mark the quoted block that follows an attribution ending before
    ``lines[j]``; returns where reading goes on (the number of lines if an
    unmarked quote follows: then all the rest is quote)."""
    n = len(lines)
    while j < n and state[j] == BLANK:
        j += 1
    if j < n and state[j] == OWN and not lines[j].startswith("\t"):
        _mark_rest(state, j, QUOTE)  # an unmarked quote we could not place: all of it
        return n
    while j < n and (state[j] in (QUOTE, BLANK) or lines[j].startswith("\t")):
        if state[j] == OWN:
            state[j] = QUOTE
        j += 1
    return j


def _is_device_line(line: str) -> bool:
    """A line a device or app adds below the message ("Sent from my iPhone").
    The patterns see the line without the white space around it (each begins
    with a run of white space, which backtracks over every leading space otherwise)."""
    text = line.strip()
    return len(text) <= _DEVICE_MAX_CHARS and bool(
        _DEVICE_LINE.match(text) or (_LIB_DEVICE and _LIB_DEVICE.match(text)))


def own_lines(body: str, sent: Sequence[SentMail] = (), domain: str | None = None) -> list[tuple[int, str]]:
    """(line number, text) of the lines the player wrote, numbered from 1:
    the first MAX_SCAN_LINES read with care (:func:`classify`), the rest of
    the mail cheaply (:func:`_tail`)."""
    whole = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    states, open_end = _classify(whole, sent, domain)
    own = [(number, line) for number, (state, line) in enumerate(states, start=1) if state == OWN]
    if open_end and len(whole) > MAX_SCAN_LINES:
        own.extend(_tail(whole, MAX_SCAN_LINES))
    return own

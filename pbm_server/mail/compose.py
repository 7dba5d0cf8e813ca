"""Every mail the server sends is made here: Jinja templates render the text
(and, where a template has an ``.html`` sibling, an HTML alternative), one
layout wraps them all, and the headers mark the mail as automatic (RFC 3834)
and thread it to the mail it answers.

Secrets never leave: :func:`redact` removes every password the processed mail
carried from every text before it becomes a message.
"""

from __future__ import annotations

import base64
import re
import textwrap
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from email.headerregistry import BaseHeader, UnstructuredHeader
from email.message import EmailMessage
from email.policy import Policy
from email.utils import format_datetime, formataddr, make_msgid
from html import escape as html_escape
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, TemplateNotFound, select_autoescape

from games.base import Result, Section
from pbm_server.base.settings import Settings
from pbm_server.mail.headers import POLICY, SMTP_POLICY

#: the package the templates are installed as (the repository's top-level
#: templates/, mapped into the wheel by setup.py)
TEMPLATE_PACKAGE = "pbm_server.templates"
MASK = "****"


def wrap(text: str, width: int = 72) -> str:
    """Wrap prose paragraphs for mail; lines starting with a space are kept as they are."""
    out = []
    for para in str(text).split("\n"):
        if not para.strip() or para.startswith(" "):
            out.append(para)
        else:
            out.append(textwrap.fill(para, width=width, break_long_words=False, break_on_hyphens=False))
    return "\n".join(out)


def hang(text: str, indent: int = 2, width: int = 76) -> str:
    """Wrap one long message line, indenting the continuation lines."""
    return textwrap.fill(str(text), width=width, subsequent_indent=" " * indent, break_long_words=False, break_on_hyphens=False)


#: no line of a mail's text part is longer than this, boards aside
MAX_LINE = 78
#: what a board line is drawn with: a line that is mostly these is a board
_BOARD_CHARS = set("|+[]()*$-_=#.:/\\<>")


def is_board_line(line: str) -> bool:
    """A line of a drawn board (rmpm's grid, curio's ranks, a table rule):
    at least 8 drawing characters (``| + [ ] ( ) * $ - _ = # . : / \\ < >``)
    making up at least a third of its non-blank characters.  Such lines are
    never wrapped: wrapped, a board no longer reads."""
    chars = [c for c in line if not c.isspace()]
    drawn = sum(1 for c in chars if c in _BOARD_CHARS)
    return drawn >= 8 and 3 * drawn >= len(chars)


def fit_lines(text: str, width: int = 72, limit: int = MAX_LINE) -> str:
    """Every line longer than ``limit`` that is not a board line, wrapped at
    ``width``: continuation lines keep the line's indent (and its ``> `` if it
    is an echo of the player's line) and add two spaces.  A word longer than
    the width (a 64-digit hash, an address) is never broken."""
    out = []
    for line in text.split("\n"):
        if len(line) <= limit or is_board_line(line):
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        if line.lstrip().startswith("> "):
            first, rest = lead + "> ", lead + ">   "
            body = line.lstrip()[2:]
        else:
            first, rest = lead, lead + "  "
            body = line.lstrip()
        out.append(textwrap.fill(body, width=width, initial_indent=first, subsequent_indent=rest,
                                 break_long_words=False, break_on_hyphens=False))
    return "\n".join(out)


def text_html(text: str) -> str:
    """Plain server text (a report's footer: deadline, seed lines, "No orders
    from ...") as HTML paragraphs, so that the HTML part carries it too."""
    paras = []
    for para in re.split(r"\n\s*\n", text.strip("\n")):
        lines = [html_escape(line.strip()) for line in para.split("\n") if line.strip()]
        if lines:
            paras.append('<p class="facts">' + "<br>\n".join(lines) + "</p>")
    return "\n".join(paras)


def thread_root(domain: str, game: str, game_id: int, thread: str | None = None) -> str:
    """The Message-ID-like root every mail of one game (or of one thread
    inside a game, such as a curio board) names in In-Reply-To/References, so
    that mail clients keep them together.  Stable: made of the game's name and
    id (a game made again under the same name gets a new thread)."""
    part = f".{thread}" if thread else ""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", f"game.{game}.{game_id}{part}")
    return f"<{safe}@{domain}>"


def cut_words(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut after a whole word with
    "..." when it is longer; a first word longer than the limit is kept whole
    (a word is never cut)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[: max(limit - 3, 0) + 1]  # with the space after a word that ends just in time
    head = head.rsplit(" ", 1)[0] if " " in head else text.split(" ", 1)[0]
    return (head.rstrip(" ,;:-") or head) + "..."


#: one RFC 2047 encoded word holds at most this many bytes of UTF-8 (60 base64 characters)
_ENCODED_BYTES = 45


def _encoded_words(word: str, space_before: bool) -> list[str]:
    """``word`` as RFC 2047 encoded words (base64 UTF-8), split between
    characters so that none is longer than 75 characters; ``space_before``:
    the space before it goes inside (white space between two encoded words
    is dropped by readers)."""
    out: list[str] = []
    chunk = " " if space_before else ""
    for ch in word:
        if len((chunk + ch).encode()) > _ENCODED_BYTES:
            out.append(chunk)
            chunk = ""
        chunk += ch
    out.append(chunk)
    return ["=?utf-8?b?" + base64.b64encode(c.encode()).decode() + "?=" for c in out]


def fold_subject(name: str, value: str, width: int = MAX_LINE, linesep: str = "\n") -> str:
    """The header field ``name: value`` folded for the wire: lines of at most
    ``width`` characters, folded only at the spaces between words (never
    within one), never right after a word ending in ":" (``ring: ...`` stays
    together), non-ASCII words as RFC 2047 encoded words."""
    atoms: list[str] = []
    encoded = False
    for word in value.split():
        if word.isascii() and "=?" not in word:
            atoms.append(word)
            encoded = False
        else:
            atoms.extend(_encoded_words(word, space_before=encoded))
            encoded = True
    lines = [f"{name}:"]
    glued = True  # the first word always goes on the field's first line
    for atom in atoms:
        if glued or len(lines[-1]) + 1 + len(atom) <= width:
            lines[-1] += " " + atom
        else:
            lines.append(" " + atom)
        glued = atom.endswith(":")
    return linesep.join(lines) + linesep


class SubjectHeader(UnstructuredHeader, BaseHeader):
    """The Subject of every mail the server makes: the email package writes
    it with :func:`fold_subject`."""

    def fold(self, *, policy: Policy) -> str:
        return fold_subject(self.name, str(self), policy.max_line_length or MAX_LINE, policy.linesep)


#: ids kept in References after the thread's root (RFC 5322 3.6.4 lets a
#: long chain be shortened; the root and the newest few keep clients threading)
KEEP_REFERENCES = 4


def thread_references(thread: str | None, references: list[str], in_reply_to: str) -> list[str]:
    """The References of a mail that answers ``in_reply_to``: the thread's
    root (``thread``, else the first id the answered mail named), then the
    newest KEEP_REFERENCES ids of the chain, ending with ``in_reply_to``;
    no id twice, so the header stays short however long the exchange."""
    chain = list(dict.fromkeys([*([thread] if thread else []), *references, in_reply_to]))
    chain.remove(in_reply_to)
    chain.append(in_reply_to)  # the answered mail is the newest, wherever else it was named
    root, rest = chain[0], chain[1:]
    return [root, *rest[-KEEP_REFERENCES:]] if rest else [root]


def make_environment() -> Environment:
    env = Environment(
        loader=PackageLoader(TEMPLATE_PACKAGE, "."),
        autoescape=select_autoescape(enabled_extensions=("html",), default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        undefined=StrictUndefined,
    )
    env.filters["wrap"] = wrap
    env.filters["hang"] = hang
    return env


#: what help texts write between $$ signs; anything else there is masked
PLACEHOLDERS = {"password", "yourpassword", "your password", "your-password", MASK}


def redact(text: str, secrets: set[str]) -> str:
    text = re.sub(
        r"\$\$(.+?)\$\$", lambda m: m.group(0) if m.group(1).lower() in PLACEHOLDERS else "$$" + MASK + "$$", text
    )
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = re.sub(r"(?<!\S)" + re.escape(secret) + r"(?!\S)", MASK, text)
            if len(secret) >= 6:
                text = text.replace(secret, MASK)
    return text


@dataclass
class Rendered:
    text: str
    html: str | None = None


@dataclass
class Reply:
    """What one command mail gets back."""

    results: list[Result] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    orders: list[str] | None = None
    order_title: str = ""
    sections: list[Section] = field(default_factory=list)
    kind: str | None = None  # the game kind whose templates the sections use


class Composer:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.env = make_environment()

    # -- rendering ------------------------------------------------------------
    def _render(self, name: str, data: dict[str, Any]) -> str:
        return self.env.get_template(name).render(**data).strip("\n")

    def render(self, template: str, data: dict[str, Any], kind: str | None = None, html: bool = True) -> Rendered:
        """Render ``template`` (``server/x.txt`` or, with ``kind``, ``KIND/x.txt``)
        and its ``.html`` sibling if there is one (and ``html``).  Every template may use
        ``domain`` (the server's mail domain) to write an address."""
        name = f"{kind}/{template}" if kind and "/" not in template else template
        data = {"domain": self.settings.domain, **data}
        text = self._render(name, data)
        part = None
        if html and name.endswith(".txt"):
            try:
                part = self._render(name[:-4] + ".html", data)
            except TemplateNotFound:
                part = None
        return Rendered(text, part)

    def section(self, section: Section, kind: str | None) -> tuple[str, str, str | None]:
        if section.template:
            r = self.render(section.template, section.data, kind)
            return section.title, r.text, r.html
        return section.title, section.text, None

    def reply(self, reply: Reply, max_bytes: int | None = None) -> Rendered:
        """The reply's body.  A section repeated word for word (ten `help rmpm`
        lines) is shown once.  ``max_bytes``: the most text the reply may have
        (a reply to a mail that proved no password); the sections that would
        go beyond it are cut, and the reply says so."""
        sections: list[tuple[str, str, str | None]] = []
        for section in reply.sections:
            rendered = self.section(section, reply.kind)
            if rendered not in sections:
                sections.append(rendered)
        notes = list(reply.notes)
        data = {
            "results": reply.results,
            "notes": notes,
            "orders": reply.orders,
            "order_title": reply.order_title,
            "sections": sections,
        }
        text = self._render("server/reply.txt", data)
        if max_bytes is not None and len(text.encode()) > max_bytes and sections:
            cut = self._cut_note(len(sections))
            notes.append(cut)
            kept: list[tuple[str, str, str | None]] = []
            data["sections"] = kept
            size = len(self._render("server/reply.txt", data).encode())
            for title, body, html in sections:
                grown = len(title.encode()) * 2 + len(body.encode()) + 8
                if size + grown > max_bytes:
                    break
                kept.append((title, body, html))
                size += grown
            notes[-1] = self._cut_note(len(sections) - len(kept))
            text = self._render("server/reply.txt", data)
            while kept and len(text.encode()) > max_bytes:  # the estimate above was short
                kept.pop()
                notes[-1] = self._cut_note(len(sections) - len(kept))
                text = self._render("server/reply.txt", data)
            sections = kept
        if max_bytes is not None and len(text.encode()) > max_bytes and reply.results:
            # the answers to the lines alone are too long (hundreds of unknown lines)
            results = list(reply.results)

            def cut_at(k: int) -> str:
                which = f"the lines after {results[k - 1].line.where}" if k else "your lines"
                data["results"] = results[:k]
                data["notes"] = notes + [f"The answers to {which} were cut: the reply was too long "
                                         "for a mail without a password."]
                return self._render("server/reply.txt", data)

            low, high = 0, len(results) - 1  # the most answers that fit: in [low, high]
            while low < high:
                mid = (low + high + 1) // 2
                if len(cut_at(mid).encode()) <= max_bytes:
                    low = mid
                else:
                    high = mid - 1
            text = cut_at(low)
        html = None
        if any(h for _, _, h in sections):
            html = self._render("server/reply.html", data)
        return Rendered(text, html)

    @staticmethod
    def _cut_note(n: int) -> str:
        return (f"This reply was too long for a mail without a password: the rest was cut ({n} section"
                f"{'s' if n != 1 else ''} not shown). Mail one `help KIND` at a time, or put your $$password$$ in the mail.")

    # -- messages ---------------------------------------------------------------
    def message(
        self,
        *,
        to_addr: str,
        to_name: str | None,
        from_local: str,
        subject: str,
        body: Rendered,
        auto: str,
        now: datetime,
        in_reply_to: str | None = None,
        references: list[str] | None = None,
        secrets: AbstractSet[str] = frozenset(),
        from_name: str = "pbm-server",
        thread: str | None = None,
    ) -> tuple[str, bytes]:
        """A complete message; returns (Message-ID, bytes).  ``from_name``: the
        From's display name (relayed press names the game and its sender).
        ``thread``: the root (:func:`thread_root`) of the game or board the
        mail belongs to: put first in References, and in In-Reply-To of a mail
        that answers no mail of its recipient."""
        domain = self.settings.domain
        greeting = f"Hello {to_name}," if to_name else "Hello,"
        layout = {"greeting": greeting, "domain": domain, "server": self.settings.server_address}
        text = fit_lines(self._render("layout.txt", {**layout, "body": redact(body.text, set(secrets))})) + "\n"
        msg = EmailMessage(policy=POLICY)
        msg["From"] = formataddr((from_name, f"{from_local}@{domain}"))
        msg["To"] = to_addr
        msg["Subject"] = SubjectHeader("Subject", redact(subject, set(secrets)))
        msg["Date"] = format_datetime(now)
        message_id = make_msgid(domain=domain)
        msg["Message-ID"] = message_id
        msg["Auto-Submitted"] = auto
        msg["X-Auto-Response-Suppress"] = "All"
        msg["X-Loop"] = f"pbm@{domain}"
        if in_reply_to:
            msg["In-Reply-To"] = in_reply_to
            msg["References"] = " ".join(thread_references(thread, references or [], in_reply_to))
        elif thread:
            msg["In-Reply-To"] = thread
            msg["References"] = thread
        msg.set_content(text, cte="quoted-printable")
        if body.html is not None:
            html = self._render(
                "layout.html", {**layout, "body": redact(body.html, set(secrets)), "title": msg["Subject"]}
            )
            msg.add_alternative(html, subtype="html", cte="quoted-printable")
        # CRLF line ends: smtplib sends bytes as they are, and SMTP needs CRLF.  An
        # address outside ASCII is written as it is (RFC 6532): an encoded word is not
        # allowed inside an address; such a mail goes only with SMTPUTF8 (outbound.py)
        wire = SMTP_POLICY if to_addr.isascii() else SMTP_POLICY.clone(utf8=True)
        return message_id, msg.as_bytes(policy=wire)

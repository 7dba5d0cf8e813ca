"""Every mail the server sends is made here: Jinja templates render the text
(and, where a template has an ``.html`` sibling, an HTML alternative), one
layout wraps them all, and the headers mark the mail as automatic (RFC 3834)
and thread it to the mail it answers.

Secrets never leave: :func:`redact` removes every password the processed mail
carried from every text before it becomes a message.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import textwrap
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from email import quoprimime
from email.headerregistry import BaseHeader, UnstructuredHeader
from email.message import EmailMessage
from email.policy import EmailPolicy, Policy
from email.utils import format_datetime, formataddr, make_msgid
from html import escape as html_escape
from importlib import resources
from secrets import token_hex
from typing import Any

import css_inline
from jinja2 import Environment, PackageLoader, StrictUndefined, Template, TemplateNotFound, select_autoescape

from games.base import Result, Section
from pbm_server.base.settings import Settings
from pbm_server.mail.headers import POLICY, SMTP_POLICY, PlainHeader, UrlListHeader, is_plain, plain_or_parsed

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


def is_link_line(line: str) -> bool:
    """A line that is one web address (the own-view and unsubscribe links):
    never wrapped, since a wrapped address no longer opens."""
    return bool(_LINK_LINE.fullmatch(line))


_LINK_LINE = re.compile(r"\s*https?://\S+")


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
    from ...") as HTML paragraphs, so that the HTML part carries it too.  The
    seed lines (a 64-digit hash or seed and the line naming it) become a
    ``<p class="proof">``, which the layout moves to the mail's end in small
    type (:func:`arrange`)."""
    paras = []
    for para in re.split(r"\n\s*\n", text.strip("\n")):
        lines = [line.strip() for line in para.split("\n") if line.strip()]
        facts: list[str] = []
        proof: list[str] = []
        for line in lines:
            if _HASH.fullmatch(line):
                if facts and facts[-1].endswith(":"):
                    proof.append(html_escape(facts.pop()))
                proof.append(f'<code class="hash">{line}</code>')
            else:
                facts.append(line)
        if facts:
            paras.append('<p class="facts">' + "<br>\n".join(html_escape(f) for f in facts) + "</p>")
        if proof:
            paras.append('<p class="proof">' + "<br>\n".join(proof) + "</p>")
    return "\n".join(paras)


#: a seed or its SHA-256 as the reports print them
_HASH = re.compile(r"[0-9a-f]{64}")
#: the lines of a report's footer that say what is due next (play/turns.py)
_DEADLINE = re.compile(r"^Next deadline: (.+)$", re.M)
_OPEN_TURN = re.compile(r"^SHA-256 of the seed of (.+ \d+):$", re.M)


def next_action(text: str) -> str | None:
    """What the reader must do next and by when, from a mail's text: a report
    names the open turn (its seed's hash) and the next deadline, e.g. "Your
    orders for week 3 are due Sat 2026-12-05 12:00 UTC."; a mail with only
    the deadline says that; None for a mail without one."""
    due = _DEADLINE.search(text)
    if due is None:
        return None
    turn = _OPEN_TURN.search(text)
    if turn is None:
        return f"Next deadline: {due.group(1).strip()}."
    return f"Your orders for {turn.group(1)} are due {due.group(1).strip()}."


_NEXT_PARA = re.compile(r'<p class="next">.*?</p>\n?', re.S)
_PROOF_PARA = re.compile(r'<p class="proof">.*?</p>\n?', re.S)


def arrange(html: str, lead: str | None) -> tuple[str, str, str]:
    """(what comes first, the body, what comes last) of a mail's HTML part:
    the reader's next action first (``lead``, and any ``<p class="next">`` a
    template wrote), the seed lines (``<p class="proof">``) last."""
    firsts = _NEXT_PARA.findall(html)
    proofs = _PROOF_PARA.findall(html)
    body = _PROOF_PARA.sub("", _NEXT_PARA.sub("", html))
    if lead and not firsts:
        firsts = [f'<p class="next">{html_escape(lead)}</p>']
    return "".join(firsts), body, "".join(proofs)


#: the stylesheet of the web pages, and the rules of the boards (mail and web)
WEB_STYLESHEET = ("web", "pbm.css")
BOARD_STYLESHEET = ("boards.css",)
#: rules of the web stylesheet for the page around the content: not in mail
_WEB_ONLY = re.compile(r"\s*(?:\*\s*$|(?:header|main|footer|svg|figure|figcaption|\.chart|tr\.rolled-back)\b)")


def css_blocks(css: str) -> list[tuple[str, str]]:
    """The top-level rules of a stylesheet as (prelude, body); an at-rule's
    body holds its own rules."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    out: list[tuple[str, str]] = []
    depth, start, prelude = 0, 0, ""
    for i, ch in enumerate(css):
        if ch == "{":
            if depth == 0:
                prelude, start = css[start:i].strip(), i + 1
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                out.append((prelude, css[start:i].strip()))
                start = i + 1
    return out


#: the at-rule of the night's colours in templates/web/pbm.css (its :root only: the rules read the colours)
DARK = "@media (prefers-color-scheme: dark)"


def _mail_rules(css: str, names: dict[str, str], important: bool = False) -> list[str]:
    """The rules of ``css`` a mail uses, ``var(--x)`` written out.  The rules of
    an at-rule (@media) stay in the mail's <style>, under the styles written
    inline: each is made ``!important``, or it would never apply."""
    rules = []
    for prelude, body in css_blocks(css):
        if prelude == ":root":
            continue
        if prelude.startswith("@"):
            inner = _mail_rules(body, names, important=True)
            if inner:
                rules.append(prelude + " { " + " ".join(inner) + " }")
            continue
        selectors = [s for s in prelude.split(",") if not _WEB_ONLY.match(s)]
        if selectors:
            body = re.sub(r"var\((--[\w-]+)\)", lambda m: names.get(m.group(1), m.group(0)), body)
            if important:
                body = "; ".join(d.strip() + " !important" for d in body.split(";") if d.strip())
            rules.append(", ".join(s.strip() for s in selectors) + " { " + body + " }")
    return rules


def _dark_rules(css: str, names: dict[str, str]) -> list[str]:
    """The declarations of ``css`` that read a colour (``var(--x)``), with the
    night's colours and ``!important``: a mail's styles are inline, and only an
    important rule of its <style> wins over them."""
    rules = []
    for prelude, body in css_blocks(css):
        if prelude.startswith("@") or prelude == ":root":
            continue
        selectors = [s for s in prelude.split(",") if not _WEB_ONLY.match(s)]
        said = [d.strip() for d in body.split(";") if "var(--" in d]
        if selectors and said:
            said = [re.sub(r"var\((--[\w-]+)\)", lambda m: names.get(m.group(1), m.group(0)), d) + " !important"
                    for d in said]
            rules.append(", ".join(s.strip() for s in selectors) + " { " + "; ".join(said) + " }")
    return rules


def _colours(css: str) -> tuple[dict[str, str], dict[str, str]]:
    """The ``--x`` colours of a stylesheet's :root, by day and by night."""
    day: dict[str, str] = {}
    night: dict[str, str] = {}
    for prelude, body in css_blocks(css):
        if prelude == ":root":
            day.update(re.findall(r"(--[\w-]+)\s*:\s*([^;]+?)\s*(?:;|$)", body))
        elif prelude == DARK:
            for inner, rules in css_blocks(body):
                if inner == ":root":
                    night.update(re.findall(r"(--[\w-]+)\s*:\s*([^;]+?)\s*(?:;|$)", rules))
    return day, day | night


#: rules for the many cells of a big board (rmpm's 625 fields): written once
#: in the <style>, not into every cell, which would take an rmpm report past
#: the 102 kB at which Gmail clips a mail; a client without <style> still
#: shows the board, plainer (its chips, fences and owned fields are inlined)
HEAD_ONLY = ("table.rmpm td {", "table.rmpm th {")


def split_stylesheet(css: str) -> tuple[str, str]:
    """(the rules to write inline, the rules kept only in the <style>)."""
    inline: list[str] = []
    head: list[str] = []
    for line in css.split("\n"):
        (head if line.startswith(HEAD_ONLY) else inline).append(line)
    return "\n".join(inline), "\n".join(head)


@functools.lru_cache(maxsize=1)
def mail_stylesheet() -> str:
    """The look of every mail's HTML part, made from the web's stylesheet
    (templates/web/pbm.css: its colours, fonts, tables, pre) and the boards'
    (templates/boards.css): the page layout rules left out and the
    ``:root`` colours written into the rules (mail clients know no CSS
    variables)."""
    root = resources.files(TEMPLATE_PACKAGE)
    web = root.joinpath(*WEB_STYLESHEET).read_text(encoding="utf-8")
    boards = root.joinpath(*BOARD_STYLESHEET).read_text(encoding="utf-8")
    day, night = _colours(web)
    dark = _dark_rules(web, night) + _dark_rules(boards, night)
    return "\n".join(_mail_rules(web, day) + _mail_rules(boards, day) + [DARK + " { " + " ".join(dark) + " }"])


#: writes the stylesheet into style attributes (Gmail and Outlook drop or
#: ignore a <style>); what cannot be inlined (@media) stays in the <style>
_INLINER = css_inline.CSSInliner(keep_style_tags=False, keep_at_rules=True, load_remote_stylesheets=False)


def inline_styles(html: str, head: str = "") -> str:
    """``html`` with its <style> written into style attributes, and
    ``head`` (rules not to inline) in a <style> of its own."""
    out = _INLINER.inline(html)
    return out.replace("</head>", f"<style>\n{head}\n</style></head>", 1) if head else out


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


class PlainSubject(PlainHeader):
    """A Subject the email package would read back as it is written (plain
    printable ASCII): kept as it is, never parsed, and written with
    :func:`fold_subject` like a :class:`SubjectHeader`."""

    def fold(self, *, policy: EmailPolicy) -> str:
        return fold_subject(self.name, str(self), policy.max_line_length or MAX_LINE, str(policy.linesep))


def subject_header(value: str) -> PlainSubject | SubjectHeader:
    """The Subject header of a mail we write: parsed only when it is not plain."""
    if is_plain("Subject", value):
        return PlainSubject("Subject", value)
    return SubjectHeader("Subject", value)


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


#: the footer's lines are at most this long (as prose), however long the domain
FOOTER_WIDTH = 72


def footer(domain: str, server: str, width: int = FOOTER_WIDTH) -> str:
    """The footer under every mail's ``-- `` line: its phrases joined on a
    line while they fit ``width``, so that a line never breaks inside a
    phrase (a long domain moves the next phrase to a line of its own, where
    fit_lines finds nothing to wrap unless the address alone is longer than
    a line)."""
    phrases = [f"pbm-server at {domain}:", f'mail "help" to {server} for the commands,',
               "\"help KIND\" for a game's rules,", "\"games\" for the games you can join."]
    lines = [phrases[0]]
    for phrase in phrases[1:]:
        if len(lines[-1]) + 1 + len(phrase) <= width:
            lines[-1] += " " + phrase
        else:
            lines.append(phrase)
    return "\n".join(lines)


def make_environment() -> Environment:
    env = Environment(
        loader=PackageLoader(TEMPLATE_PACKAGE, "."),
        autoescape=select_autoescape(enabled_extensions=("html",), default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        undefined=StrictUndefined,
        # the templates are the installed package's: no look at their files'
        # times at every reply (4 % of a batch's write transaction, measured)
        auto_reload=False,
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


#: of refused lines refused the same way, only the first this many are echoed
SAME_REFUSALS_SHOWN = 5
_QUOTED_PART = re.compile(r"'[^']*'|\"[^\"]*\"|\d+")


def refusal_kind(message: str) -> str:
    """What refusals have in common when they are "the same": the message
    with what it quotes of the line (a word, a number) left out."""
    return _QUOTED_PART.sub("_", message)


def fold_refused(results: list[Result]) -> tuple[list[Result], list[str]]:
    """The results to echo, and after each the line that says how many more
    lines were refused the same way and not echoed ("" for none): of each
    kind of refusal (:func:`refusal_kind`) the first SAME_REFUSALS_SHOWN."""
    by_kind: dict[str, list[int]] = {}
    for i, r in enumerate(results):
        if not r.ok:
            by_kind.setdefault(refusal_kind(r.message), []).append(i)
    hidden: set[int] = set()
    after: dict[int, str] = {}
    for found in by_kind.values():
        rest = found[SAME_REFUSALS_SHOWN:]
        if rest:
            hidden.update(rest)
            n = len(rest)
            after[found[SAME_REFUSALS_SHOWN - 1]] = (
                f"... and {n} more line{'s' if n != 1 else ''} refused the same way "
                f"(up to {results[rest[-1]].line.where}), not shown")
    shown = [i for i in range(len(results)) if i not in hidden]
    return [results[i] for i in shown], [after.get(i, "") for i in shown]


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


#: the boundary of our multipart mails: one per process, so their Content-Type
#: is parsed and written once (mail/headers.py) and no boundary is searched
#: for.  Both parts are quoted-printable, where "=" is always written "=3D",
#: so a boundary made with "=" never occurs inside a part.
BOUNDARY = f"=_pbm_{token_hex(8)}="


class Composer:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.env = make_environment()
        #: the templates compiled, by name (Environment.get_template looks in
        #: its own cache through the loader on every call)
        self._templates: dict[str, Template] = {}
        #: texts that depend on nothing but the settings (:meth:`once`)
        self._once: dict[tuple[Any, ...], Rendered] = {}
        self._ours: re.Pattern[str] | None = None

    def public(self, text: str) -> str:
        """``text`` with our addresses as the world sees them: with
        PBM_MAILBOX_ADDRESS every ``LOCAL@PBM_DOMAIN`` (the server's inner
        name, which the templates and notices write) becomes the mailbox's
        plus address (Settings.address); without it, ``text`` as it is."""
        if not self.settings.mailbox_address:
            return text
        if self._ours is None:
            self._ours = re.compile(r"(?<![\w.+-])([A-Za-z0-9][\w.+-]*)@" + re.escape(self.settings.domain)
                                    + r"(?![\w-]|\.[A-Za-z0-9])", re.IGNORECASE)
        def ours(m: re.Match[str]) -> str:
            local = m.group(1)  # as written: a placeholder NAME stays NAME
            return self.settings.address(local.lower() if local.lower() in ("pbm", "postmaster") else local)

        return self._ours.sub(ours, text)

    # -- rendering ------------------------------------------------------------
    def _render(self, name: str, data: dict[str, Any]) -> str:
        template = self._templates.get(name)
        if template is None:
            template = self._templates[name] = self.env.get_template(name)
        return template.render(**data).strip("\n")

    def once(self, key: tuple[Any, ...], template: str, data: Callable[[], dict[str, Any]]) -> Rendered:
        """``render(template, data())``, made once per ``key`` for the life of
        this composer: for a text that depends on nothing but the settings
        and the key (the help list every ``help`` mail gets)."""
        found = self._once.get(key)
        if found is None:
            found = self._once[key] = self.render(template, data())
        return found

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
        shown, more = fold_refused(reply.results)
        data = {
            "results": shown,
            "more": more,
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
        if max_bytes is not None and len(text.encode()) > max_bytes and shown:
            # the answers to the lines alone are too long (hundreds of unknown lines)
            results = shown

            def cut_at(k: int) -> str:
                which = f"the lines after {results[k - 1].line.where}" if k else "your lines"
                data["results"] = results[:k]
                data["more"] = more[:k]
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

    def html_part(self, layout: dict[str, str], body: str, lead: str | None, title: str) -> str:
        """The HTML part: the layout around ``body``, the reader's next action
        first and the seed lines last (:func:`arrange`), styled by the web's
        stylesheet (:func:`mail_stylesheet`), written inline for the clients
        that drop a <style>."""
        first, middle, last = arrange(body, lead)
        inline, head = split_stylesheet(mail_stylesheet())
        page = self._render("layout.html", {**layout, "first": first, "body": middle, "last": last, "title": title,
                                            "css": inline})
        return inline_styles(page, head)

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
        unsubscribe: Sequence[str] | None = None,
        message_id: str | None = None,
    ) -> tuple[str, bytes]:
        """A complete message; returns (Message-ID, bytes).  ``from_name``: the
        From's display name (relayed press names the game and its sender).
        ``thread``: the root (:func:`thread_root`) of the game or board the
        mail belongs to: put first in References, and in In-Reply-To of a mail
        that answers no mail of its recipient.  ``unsubscribe``: the URLs
        (an https one first, if any, then a mailto one) of a mail a recipient
        may stop: its List-Unsubscribe, written as plain bytes
        (:class:`UrlListHeader`), with List-Unsubscribe-Post (one click, RFC
        8058) only when an https URL is among them (play/streams.py).
        ``message_id``: the one :meth:`deferred` chose (default: a new one)."""
        domain = self.settings.domain
        greeting = f"Hello {to_name}," if to_name else "Hello,"
        server = self.settings.server_address
        shown = self.settings.mailbox_address.rpartition("@")[2] or domain  # the mailbox's domain, if any
        layout = {"greeting": greeting, "domain": shown, "server": server, "footer": footer(shown, server)}
        plain = self.public(redact(body.text, set(secrets)))
        lead = next_action(plain)
        text = fit_lines(self._render("layout.txt", {**layout, "lead": lead, "body": plain})) + "\n"
        message_id = message_id or make_msgid(domain=domain)
        # the values of this mail alone are written as they are when they are plain
        headers: list[tuple[str, Any]] = [
            ("From", plain_or_parsed("From", formataddr((from_name, self.settings.address(from_local))))),
            ("To", plain_or_parsed("To", to_addr)),
            ("Subject", subject_header(redact(subject, set(secrets)))),
            ("Date", plain_or_parsed("Date", format_datetime(now))),
            ("Message-ID", plain_or_parsed("Message-ID", message_id)),
            ("Auto-Submitted", plain_or_parsed("Auto-Submitted", auto)),
            ("X-Auto-Response-Suppress", plain_or_parsed("X-Auto-Response-Suppress", "All")),
            ("X-Loop", plain_or_parsed("X-Loop", server)),
        ]
        if unsubscribe is not None:
            headers.append(("List-Unsubscribe", UrlListHeader("List-Unsubscribe", unsubscribe)))
            if any(url.startswith("https://") for url in unsubscribe):
                headers.append(("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"))
        if in_reply_to:
            headers.append(("In-Reply-To", plain_or_parsed("In-Reply-To", in_reply_to)))
            headers.append(("References", plain_or_parsed(
                "References", " ".join(thread_references(thread, references or [], in_reply_to)))))
        elif thread:
            headers.append(("In-Reply-To", plain_or_parsed("In-Reply-To", thread)))
            headers.append(("References", plain_or_parsed("References", thread)))
        if body.html is None and to_addr.isascii():
            return message_id, text_only_mail(headers, text)
        msg = EmailMessage(policy=POLICY)
        for name, value in headers:
            msg[name] = value
        msg.set_content(text, cte="quoted-printable")
        if body.html is not None:
            msg.make_alternative(boundary=BOUNDARY)
            msg.add_alternative(self.html_part(layout, self.public(redact(body.html, set(secrets))), lead,
                                               str(msg["Subject"])),
                                subtype="html", cte="quoted-printable")
        # CRLF line ends: smtplib sends bytes as they are, and SMTP needs CRLF.  An
        # address outside ASCII is written as it is (RFC 6532): an encoded word is not
        # allowed inside an address; such a mail goes only with SMTPUTF8 (outbound.py)
        wire = SMTP_POLICY if to_addr.isascii() else SMTP_POLICY.clone(utf8=True)
        return message_id, msg.as_bytes(policy=wire)

    def deferred(
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
        thread: str | None = None,
    ) -> tuple[str, bytes]:
        """What :meth:`message` would return, as the outbox keeps it until
        delivery: the Message-ID, chosen now, and the message's parts, the
        secrets already masked, as JSON after :data:`DEFERRED`.  Delivery
        writes the message out (:func:`written_out`), outside the write
        transaction that put it in the outbox: writing out a reply is most of
        the CPU of answering a mail, and on SQLite every write transaction of
        the machine waits for the one open.  Written out again on every
        attempt, it is the same mail (Message-ID, Date, text) each time."""
        keep = set(secrets)
        message_id = make_msgid(domain=self.settings.domain)
        parts = {
            "domain": self.settings.domain,
            **({"mailbox": self.settings.mailbox_address} if self.settings.mailbox_address else {}),
            "message_id": message_id,
            "to_addr": to_addr,
            "to_name": to_name,
            "from_local": from_local,
            "subject": redact(subject, keep),
            "text": redact(body.text, keep),
            "html": redact(body.html, keep) if body.html is not None else None,
            "auto": auto,
            "now": now.isoformat(),
            "in_reply_to": in_reply_to,
            "references": references,
            "thread": thread,
        }
        return message_id, DEFERRED + json.dumps(parts, ensure_ascii=False, separators=(",", ":")).encode()


def text_only_mail(headers: list[tuple[str, Any]], text: str) -> bytes:
    """A mail of one plain-text part, written for SMTP: the bytes the email
    package writes for an EmailMessage with ``headers`` and
    ``set_content(text, cte="quoted-printable")`` (``SMTP_POLICY``), without
    the message object, its content manager and its generator in between
    (which took about half of the CPU of writing out a reply).  Each header
    is still stored and folded by the package's policy, as the generator
    would; the MIME headers are the ones the package writes for such a part
    (:func:`_text_part_headers`), and the body is its quoted-printable
    encoding of the UTF-8 text.  ``tests/server/test_text_only_mail.py``
    holds the two to the same bytes.  The address of the recipient must be
    ASCII (else the mail goes with SMTPUTF8 and the package writes it)."""
    policy = SMTP_POLICY
    out = [policy.fold_binary(*policy.header_store_parse(name, value)) for name, value in headers]
    out.append(_text_part_headers())
    lines = text.encode("utf-8").splitlines()
    encoded = quoprimime.body_encode((b"\n".join(lines) + b"\n").decode("latin-1"),
                                     maxlinelen=POLICY.max_line_length or 78)
    out.append(_NEWLINES.sub("\r\n", encoded).encode("ascii", "surrogateescape"))
    return b"".join(out)


#: every line end, as the email package's generator finds them
_NEWLINES = re.compile(r"\r\n|\r|\n")


@functools.cache
def _text_part_headers() -> bytes:
    """The MIME headers (and the blank line after them) the email package
    writes for a text part set with ``set_content(..., cte="quoted-printable")``."""
    msg = EmailMessage(policy=POLICY)
    msg.set_content("x\n", cte="quoted-printable")
    raw = msg.as_bytes(policy=SMTP_POLICY)
    return raw[: raw.index(b"\r\n\r\n") + 4]


#: how an outbox row that holds a reply still to be written out starts (Composer.deferred)
DEFERRED = b"pbm-deferred-message/1\n"


@functools.lru_cache(maxsize=4)
def _composer_of(domain: str, mailbox: str = "") -> Composer:
    return Composer(Settings(domain=domain, mailbox_address=mailbox))


def written_out(raw: bytes) -> bytes:
    """The mail an outbox row holds: its bytes as they are, or, for a reply
    kept as its parts (:meth:`Composer.deferred`), the message written out."""
    if not raw.startswith(DEFERRED):
        return raw
    p = json.loads(raw[len(DEFERRED):])
    return _composer_of(p["domain"], p.get("mailbox", "")).message(
        to_addr=p["to_addr"], to_name=p["to_name"], from_local=p["from_local"], subject=p["subject"],
        body=Rendered(p["text"], p["html"]), auto=p["auto"], now=datetime.fromisoformat(p["now"]),
        in_reply_to=p["in_reply_to"], references=p["references"], thread=p["thread"], message_id=p["message_id"],
    )[1]

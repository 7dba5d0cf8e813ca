"""The `pbm` command line."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import secrets
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any, NoReturn, TextIO

import click
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from games import KINDS, get_rules
from games.base import NOT_REGISTERED, Actor, Context, GameError, Line, Rules
from pbm_server import __version__
from pbm_server.accounts import service as accounts
from pbm_server.accounts.passwords import hash_password
from pbm_server.base import clock, logs
from pbm_server.base import settings as settings_mod
from pbm_server.base.errors import ServerRefused, undone
from pbm_server.base.localtime import show_time
from pbm_server.base.printable import printable
from pbm_server.base.settings import Settings, SettingsError
from pbm_server.mail.compose import Composer
from pbm_server.mail.inbound import store_messages
from pbm_server.mail.mailtext import is_null_sender
from pbm_server.mail.queues import QueueStatus, queue_status
from pbm_server.play.creation import create_game
from pbm_server.play.moves import apply_commands
from pbm_server.play.notices import Mailer
from pbm_server.play.turns import run_turn, why_not_done
from pbm_server.store.db import EXCLUSIVE, Database, alembic_errors
from pbm_server.store.lookup import account_by_handle, audit, find_game, player_count
from pbm_server.store.models import Account, Game, InboundMail, OutboundMail

EX_USAGE = 2  # bad settings: one line per problem, never a traceback
EX_DATAERR = 65  # `mail inject`: not a mail (the MTA bounces it)
EX_NOUSER = 67  # `mail inject`: no such game or address (the MTA bounces it)
EX_TEMPFAIL = 75  # `mail inject`: our fault, the MTA keeps the mail and retries

EXPORT_FORMAT = "pbm-server game"

#: a GM desk operation run by :func:`_desk`: (session, game, mailer, now) -> what to print
DeskOp = Callable[[Session, Game, Mailer, datetime], str]


class Env:
    """What every command needs: the settings (checked) and the database (opened
    and upgraded on first use).  A problem with either ends the command with one
    line per problem and ``fault_code`` (2; 75 for ``mail inject``)."""

    def __init__(self) -> None:
        self.fault_code = EX_USAGE
        #: problems on one line, no warnings (`mail inject`: the MTA shows stderr to the sender)
        self.one_line = False
        self._loaded: settings_mod.Loaded | None = None
        self._db: Database | None = None
        #: (from, to) revisions if opening the database upgraded it
        self.upgraded: tuple[str | None, str | None] | None = None

    @property
    def loaded(self) -> settings_mod.Loaded:
        if self._loaded is None:
            try:
                self._loaded = settings_mod.load()
            except SettingsError as exc:
                if self.one_line:
                    click.echo("pbm: " + "; ".join(exc.problems), err=True)
                    sys.exit(self.fault_code)
                for problem in exc.problems:
                    click.echo(f"pbm: {problem}", err=True)
                sys.exit(self.fault_code)
            for warning in [] if self.one_line else self._loaded.warnings:
                click.echo(f"pbm: warning: {warning}", err=True)
            clock.use_file(self._loaded.settings.clock_file)
        return self._loaded

    @property
    def settings(self) -> Settings:
        return self.loaded.settings

    @property
    def db(self) -> Database:
        """The database, upgraded to the newest schema."""
        return self.open_db(upgrade=True)

    def open_db(self, upgrade: bool) -> Database:
        if self._db is None:
            url = self.settings.database_url
            try:
                db = Database(url, self.settings.sqlite_max_page_count)
                if upgrade:
                    self.upgraded = _upgrade(db)
                else:
                    db.engine.connect().close()
            except (OSError, SQLAlchemyError, alembic_errors()) as exc:
                shown = settings_mod.shown(self.settings, "database_url")
                fail(f"PBM_DATABASE_URL: cannot open {shown}: {_first_line(exc)}", self.fault_code)
            self._db = db
        return self._db

    def mailer(self) -> Mailer:
        return Mailer(Composer(self.settings))


pass_env = click.make_pass_decorator(Env, ensure=True)


def _upgrade(db: Database) -> tuple[str | None, str | None] | None:
    """Upgrade ``db`` to the newest migration; (from, to) if it was not
    there already, with one log line saying so (Alembic's own INFO lines,
    one or more per migration, are shown only with -v)."""
    quiet = logging.getLogger("alembic")
    level = quiet.level
    if not _verbose():
        quiet.setLevel(logging.WARNING)
    try:
        moved = db.upgrade()
    finally:
        quiet.setLevel(level)
    if moved is not None:
        logging.getLogger("pbm_server.db").info("database upgraded from %s to migration %s", moved[0] or "empty",
                                                moved[1])
    return moved


def _verbose() -> bool:
    """Whether `pbm -v` was given."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().params.get("verbose"))


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"pbm: {message}", err=True)
    sys.exit(code)


def _first_line(exc: BaseException) -> str:
    """The driver's own words for a database fault, without SQLAlchemy's wrapping."""
    inner = getattr(exc, "orig", None) or exc
    lines = [ln.strip() for ln in str(inner).splitlines() if ln.strip()]
    return lines[0] if lines else type(inner).__name__


def parse_kv(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            fail(f"option {pair!r} is not KEY=VALUE")
        key, value = pair.split("=", 1)
        if value.startswith("@"):
            try:
                with open(value[1:], encoding="utf-8") as fh:
                    value = fh.read()
            except OSError as exc:
                fail(f"option {key}: cannot read {value[1:]}: {exc}")
        out[key.strip()] = value
    return out


def _settings_help() -> str:
    """The settings table for ``pbm serve --help``, from the Settings fields."""
    lines = ["\b", "Settings (environment; a TOML file named by PBM_CONFIG may add them, same names in lower",
             "case without PBM_; `pbm config show` prints what is in effect):"]
    for variable, default, meaning in settings_mod.describe():
        lines.append(f"  {variable} = {default}")
        lines.append(f"      {meaning}")
    return "\n".join(lines)


@click.group()
@click.version_option(__version__, "-V", "--version", prog_name="pbm-server", message="%(prog)s %(version)s")
@click.option("-v", "--verbose", is_flag=True, help="log what the server does")
def main(verbose: bool) -> None:
    """pbm-server: an e-mail play-by-mail game server."""
    # the text format with hidden characters escaped (logs.TextLines), as `pbm serve` writes it
    stderr = logging.StreamHandler()
    stderr.setFormatter(logs.TextLines())
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[stderr])


@main.command(epilog=_settings_help())
@click.option("--without", "without", multiple=True, type=click.Choice(["listener", "worker", "outbound", "scheduler", "http"]), help="leave a part out (run it in another process)")
@click.option("--workers", "workers", type=click.IntRange(1, 64), default=None,
              help="worker threads processing mail (default: PBM_WORKERS)")
@pass_env
def serve(env: Env, without: tuple[str, ...], workers: int | None) -> None:
    """Run the listener, worker, outbound delivery and scheduler."""
    from pbm_server.running.httpside import CannotListen
    from pbm_server.running.mailbox import MailboxRefused
    from pbm_server.running.server import PARTS, Server

    logging.getLogger().setLevel(logging.INFO)
    logging.getLogger("mail.log").setLevel(logging.WARNING)
    if not _verbose():
        # Alembic says INFO at every look at the schema (a dozen lines a start, in
        # each process); an upgrade is logged in one line of our own (_upgrade)
        logging.getLogger("alembic").setLevel(logging.WARNING)
    settings = env.settings
    logs.use_format(settings.log_format)
    if workers is not None:
        settings = dataclasses.replace(settings, workers=workers)
    env.db.dispose()  # opened once here so that a bad PBM_DATABASE_URL is one line, not a traceback
    try:
        Server(settings, tuple(p for p in PARTS if p not in without)).serve_forever()
    except CannotListen as exc:
        fail(str(exc), EX_USAGE)
    except MailboxRefused as exc:
        fail(str(exc), EX_USAGE)
    except OSError as exc:
        fail(f"PBM_LISTEN: cannot listen on {settings.listen}: {exc.strerror or exc}", EX_USAGE)


@main.group()
def config() -> None:
    """The settings in effect."""


@config.command("show")
@pass_env
def config_show(env: Env) -> None:
    """Print the effective settings as TOML, each with its source; secrets hidden."""
    loaded = env.loaded
    click.echo("# pbm-server settings in effect" + (f" (PBM_CONFIG={loaded.config_file})" if loaded.config_file else ""))
    for name in settings_mod.Settings.__dataclass_fields__:
        value = getattr(loaded.settings, name)
        shown = settings_mod.shown(loaded.settings, name)
        text = json.dumps(shown) if isinstance(value, str) else shown
        source = loaded.sources[name]
        if source == settings_mod.ENVIRONMENT:
            source += " " + settings_mod.env_name(name)
        click.echo(f"{name} = {text}  # {source}")


@main.group()
def db() -> None:
    """Database schema."""


@db.command("upgrade")
@pass_env
def db_upgrade(env: Env) -> None:
    """Create or upgrade the database to the newest schema."""
    env.open_db(upgrade=True)
    where = settings_mod.shown(env.settings, "database_url")
    if env.upgraded is not None:
        before, after = env.upgraded
        click.echo(f"database at {where} upgraded from {before or 'empty'} to migration {after}")
    else:
        click.echo(f"database at {where} is up to date")


@db.command("current")
@pass_env
def db_current(env: Env) -> None:
    """Print the schema revision the database is at."""
    from pbm_server.store.db import current_revision

    click.echo(current_revision(env.open_db(upgrade=False).engine) or "empty")


@db.command("downgrade")
@click.argument("revision")
@click.option("--yes", is_flag=True, help="do it (downgrading drops the newer tables and columns)")
@pass_env
def db_downgrade(env: Env, revision: str, yes: bool) -> None:
    """Take the schema back to REVISION (e.g. 0001); back up first."""
    from pbm_server.store.db import downgrade

    if not yes:
        fail("downgrading drops what the newer migrations added: back up first, then repeat with --yes", EX_USAGE)
    try:
        downgrade(env.open_db(upgrade=False).engine, revision)
    except alembic_errors() as exc:
        fail(f"cannot downgrade to {revision}: {_first_line(exc)}", EX_USAGE)
    click.echo(f"database at {settings_mod.shown(env.settings, 'database_url')} is at revision {revision}")


@db.command("backup")
@click.argument("target", type=click.Path(dir_okay=False))
@pass_env
def db_backup(env: Env, target: str) -> None:
    """Copy a SQLite database to TARGET while the server runs (online backup).

    PostgreSQL: use pg_dump (docs/operations.md)."""
    import os
    import sqlite3

    from sqlalchemy.engine import make_url

    url = make_url(env.settings.database_url)
    if url.get_backend_name() != "sqlite":
        fail("pbm db backup copies SQLite databases; for PostgreSQL run pg_dump (see docs/operations.md)", EX_USAGE)
    if os.path.exists(target):
        fail(f"{target} exists already: choose a new file", EX_USAGE)
    env.open_db(upgrade=True)  # the schema is current before we copy it
    src = sqlite3.connect(url.database or "", timeout=60)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst, pages=1024)
        check = dst.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        dst.close()
        src.close()
    if check != "ok":
        fail(f"the copy in {target} failed its integrity check: {check}")
    click.echo(f"{url.database} copied to {target} ({os.path.getsize(target)} bytes, integrity ok)")


@main.group()
def account() -> None:
    """Player accounts."""


@account.command("add")
@click.argument("handle")
@click.argument("email", required=False)
@click.option("--gm", is_flag=True, help="the game master's account, at PBM_GM_ADDRESS (never claimable by mail)")
@click.password_option()
@pass_env
def account_add(env: Env, handle: str, email: str | None, gm: bool, password: str) -> None:
    """Register HANDLE at EMAIL, no confirmation needed (with --gm: the GM's account at PBM_GM_ADDRESS)."""
    gm_address = env.settings.gm_address.lower()
    if gm:
        if not gm_address:
            fail("--gm needs PBM_GM_ADDRESS: set it to the game master's address first", EX_USAGE)
        if email and email.lower() != gm_address:
            fail(f"--gm makes the account at PBM_GM_ADDRESS ({gm_address}), not at {email}", EX_USAGE)
        email = gm_address
    elif not email:
        fail("give the account's address: pbm account add HANDLE EMAIL (or --gm for the game master)", EX_USAGE)
    try:
        accounts.check_new(handle, password)
    except ServerRefused as exc:
        fail(str(exc))
    now = clock.now()
    with env.db.write(world=EXCLUSIVE) as s:
        try:
            accounts.add(s, handle, email, password, now)
        except ServerRefused as exc:
            fail(str(exc))
        audit(s, now, "cli", "account add", f"{handle} <{email.lower()}>")
    click.echo(f"{handle} <{email.lower()}> registered")


def _account_or_fail(s: Session, handle: str, *, removed: bool = False) -> Account:
    try:
        return accounts.find(s, handle, removed=removed)
    except ServerRefused as exc:
        fail(str(exc))


def _new_password() -> str:
    """The new password from a prompt (twice, hidden) or the first line of stdin."""
    if sys.stdin.isatty():
        return str(click.prompt("New password", hide_input=True, confirmation_prompt=True))
    line = sys.stdin.readline()
    if not line:
        fail("no password on standard input: pipe it in (one line) or run in a terminal to be asked", EX_USAGE)
    return line.rstrip("\r\n")


@account.command("list")
@pass_env
def account_list(env: Env) -> None:
    """Every account: handle, address, registered, and the GM's and removed ones marked."""
    with env.db.write(world=EXCLUSIVE) as s:
        rows = accounts.everyone(s)
        for acc in rows:
            removed = accounts.is_removed(acc)
            mark = " (game master)" if accounts.is_gm(env.settings, acc) else " (removed)" if removed else ""
            shown = "-" if removed else acc.email
            click.echo(f"{acc.handle:<20} {shown:<40} registered {acc.created_at:%Y-%m-%d}{mark}")
        if not rows:
            click.echo("no accounts yet")
        audit(s, clock.now(), "cli", "account list", f"{len(rows)} account(s)")


@account.command("show")
@click.argument("handle")
@pass_env
def account_show(env: Env, handle: str) -> None:
    """One account: address, time zone, vacation, games played and observed, open codes (never the codes)."""
    with env.db.write(world=EXCLUSIVE) as s:
        acc = _account_or_fail(s, handle, removed=True)
        now = clock.now()
        click.echo(f"handle:      {acc.handle}")
        click.echo(f"address:     {'- (removed)' if accounts.is_removed(acc) else acc.email}")
        click.echo(f"registered:  {acc.created_at:%Y-%m-%d %H:%M} UTC")
        click.echo(f"time zone:   {acc.timezone or 'UTC'}")
        if acc.absent_from and acc.absent_to and acc.absent_to > now:
            click.echo(f"vacation:    {acc.absent_from:%Y-%m-%d %H:%M} to {acc.absent_to:%Y-%m-%d %H:%M} UTC")
        click.echo(f"plays in:    {', '.join(accounts.games_played(s, acc)) or 'no running game'}")
        watched = [g.name for g in accounts.observed(s, acc.id)]
        click.echo(f"observes:    {', '.join(watched) or 'nothing'}")
        for c in accounts.open_codes(s, acc, now):
            click.echo(f"open code:   {c.purpose} to {c.email}, expires {c.expires_at:%Y-%m-%d %H:%M} UTC")
        audit(s, now, "cli", "account show", acc.handle)


@account.command("set-password")
@click.argument("handle")
@click.argument("extra", nargs=-1, metavar="")
@pass_env
def account_set_password(env: Env, handle: str, extra: tuple[str, ...]) -> None:
    """Set HANDLE's password: read from a prompt, or one line of standard input (never an argument)."""
    from pbm_server.accounts.passwords import password_problem

    if extra:  # never echoed: it may be the password
        fail("the password is never taken from the command line (it would stay in the shell history and the "
             "process list): pipe it in on standard input or answer the prompt; nothing was changed", EX_USAGE)

    with env.db.read() as s:
        _account_or_fail(s, handle)
    password = _new_password()
    problem = password_problem(password)
    if problem:
        fail(f"{problem}; nothing was changed", EX_USAGE)
    hashed = hash_password(password)
    now = clock.now()
    with env.db.write(world=EXCLUSIVE) as s:
        acc = _account_or_fail(s, handle)
        accounts.set_password(s, acc, hashed, unlock=True)
        audit(s, now, "cli", "account set-password", acc.handle)
        name = acc.handle
    click.echo(f"the password of {name} is set")


@account.command("set-email")
@click.argument("handle")
@click.argument("address")
@pass_env
def account_set_email(env: Env, handle: str, address: str) -> None:
    """Move HANDLE to ADDRESS at once (no confirmation mail; tell the player)."""
    new = address.strip("<>").lower()
    if not accounts.ADDRESS_RE.match(new):
        fail(f"{address!r} is not an e-mail address (expected e.g. alice@example.org)", EX_USAGE)
    if new.endswith("@" + env.settings.domain.lower()):
        fail(f"{new} is an address of this server (PBM_DOMAIN); give the player's own", EX_USAGE)
    now = clock.now()
    with env.db.write(world=EXCLUSIVE) as s:
        acc = _account_or_fail(s, handle)
        try:
            old = accounts.move(s, env.settings, acc, new)
        except ServerRefused as exc:
            fail(str(exc))
        audit(s, now, "cli", "account set-email", f"{acc.handle}: {old} -> {new}")
        name = acc.handle
    click.echo(f"{name} is now at {new} (was {old})")


@account.command("remove")
@click.argument("handle")
@pass_env
def account_remove(env: Env, handle: str) -> None:
    """Remove HANDLE (refused while it plays a running game).  An account that
    played before keeps its handle reserved, without address or password."""
    now = clock.now()
    with env.db.write(world=EXCLUSIVE) as s:
        acc = _account_or_fail(s, handle)
        name, old = acc.handle, acc.email
        try:
            kept = accounts.remove(s, acc)
        except ServerRefused as exc:
            fail(str(exc))
        if kept:
            audit(s, now, "cli", "account remove", f"{name} <{old}>: address and password removed, handle kept")
            said = (f"{name} removed: its address and password are gone; the handle stays reserved because it "
                    "appears in game histories")
        else:
            audit(s, now, "cli", "account remove", f"{name} <{old}>")
            said = f"{name} removed"
    click.echo(said)


@main.group()
def game() -> None:
    """Games: create, list, show, export, import, GM commands."""


@game.command("new")
@click.argument("kind", type=click.Choice(list(KINDS)))
@click.argument("name")
@click.option("--option", "options", multiple=True, help="KEY=VALUE (VALUE @FILE reads a file)")
@click.option("--deadline", default=None, help="e.g. 'every Saturday 03:00 UTC'; 'none' for no deadline")
@pass_env
def game_new(env: Env, kind: str, name: str, options: tuple[str, ...], deadline: str | None) -> None:
    """Create a game; it listens at NAME@DOMAIN.  Options: the game's own
    (see `help KIND`) and the server's early=on|off, grace=DURATION,
    remind=DURATION."""
    from pbm_server.base.durations import show_duration
    from pbm_server.play import gmdesk

    with env.db.write(world=EXCLUSIVE) as s:
        try:
            now = clock.now()
            g = gmdesk.new_game(s, kind, name, parse_kv(options), deadline, now, "cli", env.settings)
        except ServerRefused as exc:
            fail(str(exc))
        click.echo(f"{g.kind} game {g.name} created: players mail {env.settings.address(g.name)}"
                   + (f"; next deadline {g.next_deadline:%Y-%m-%d %H:%M} UTC" if g.next_deadline else "")
                   + f"; early={'on' if g.early else 'off'} grace={show_duration(g.grace_minutes)} remind={show_duration(g.remind_minutes)}")
        note = gmdesk.first_deadline_note(g, now, f"--deadline EXPR, or later: pbm game deadline {g.name} EXPR")
        if note:
            click.echo(f"NOTE: {note}")
        if g.notify_url:
            click.echo(f"secret: {g.notify_secret}")


@game.command("list")
@pass_env
def game_list(env: Env) -> None:
    """All games with their kind, status, turn and next deadline."""
    with env.db.read() as s:
        games = s.scalars(select(Game).order_by(Game.name)).all()
        if not games:
            click.echo("no games")
        for g in games:
            dl = f"{g.next_deadline:%Y-%m-%d %H:%M} UTC" if g.next_deadline else "-"
            click.echo(f"{g.name:20} {g.kind:10} {g.status:9} turn {g.turn:<4} players {player_count(s, g):<5} next deadline {dl}")


@game.command("show")
@click.argument("name")
@click.option("--as", "viewer", default=None, help="show what this player may see")
@pass_env
def game_show(env: Env, name: str, viewer: str | None) -> None:
    """The game as a player (or, without --as, an observer) sees it."""
    composer = Composer(env.settings)
    with env.db.read() as s:
        g = find_game(s, name)
        if g is None:
            fail(f"no game named {name}")
        acc = account_by_handle(s, viewer) if viewer else None
        if viewer and acc is None:
            fail(f"there is no account named {viewer!r}: --as takes the handle of a player of {g.name} "
                 "(pbm account list lists the accounts)")
        rules = get_rules(g.kind)
        if acc is not None:
            playing = {h.lower(): h for h in rules.players(g.state)}
            viewer = playing.get(acc.handle_key)
            if viewer is None:
                click.echo(f"({acc.handle} does not play in {g.name}: this is what an observer sees)\n")
        if g.notify_url:
            click.echo(f"alerts: {g.notify_url}" + (f" (STOPPED {g.notify_error})" if g.notify_error else ""))
            click.echo(f"secret: {g.notify_secret}\n")
        sections = rules.view(g.state, viewer)
        for sec in sections:
            title, text, _ = composer.section(sec, g.kind)
            if title:
                click.echo(title)
                click.echo("=" * len(title))
            click.echo(text)
            click.echo()


@game.command("export")
@click.argument("name")
@pass_env
def game_export(env: Env, name: str) -> None:
    """Print the game as a JSON document (see docs/export.md)."""
    with env.db.read() as s:
        g = find_game(s, name)
        if g is None:
            fail(f"no game named {name}")
        doc = {
            "format": EXPORT_FORMAT,
            "format_version": 1,
            "kind": g.kind,
            "name": g.name,
            "options": g.options,
            "turn": g.turn,
            "status": g.status,
            "deadline": g.deadline,
            "state": get_rules(g.kind).export_state(g.state),
        }
    click.echo(json.dumps(doc, indent=2, sort_keys=True))


@game.command("import")
@click.argument("kind", type=click.Choice(list(KINDS)))
@click.argument("name")
@click.argument("file", type=click.File("r"))
@click.option("--deadline", default=None)
@pass_env
def game_import(env: Env, kind: str, name: str, file: TextIO, deadline: str | None) -> None:
    """Create game NAME from a JSON file: an export, or a bare game state."""
    try:
        doc = json.load(file)
    except json.JSONDecodeError as exc:
        fail(f"{file.name} is not JSON: {exc}")
    rules = get_rules(kind)
    options: dict[str, Any] = {}
    turn = 1
    if isinstance(doc, dict) and doc.get("format") == EXPORT_FORMAT:
        if doc.get("kind") != kind:
            fail(f"{file.name} holds a {doc.get('kind')} game, not {kind}")
        state, options, turn = doc["state"], doc.get("options") or {}, int(doc.get("turn") or 1)
        deadline = deadline if deadline is not None else doc.get("deadline")
    else:
        state = doc
    try:
        state = rules.import_state(state)
    except GameError as exc:
        fail(f"{file.name}: {exc}")
    if not (isinstance(doc, dict) and doc.get("format") == EXPORT_FORMAT):
        # a bare state: the server's turn number follows the game's own count
        turn = rules.turn_of(state) or 1
    with env.db.write(world=EXCLUSIVE) as s:
        try:
            g = create_game(s, kind, name, {}, deadline, clock.now(), state=state)
        except ServerRefused as exc:
            fail(str(exc))
        if options:
            g.options = options
        g.turn = turn
        audit(s, clock.now(), "cli", "game import", f"{kind} {name} from {file.name}", g)
        click.echo(f"{kind} game {g.name} imported at turn {g.turn}")


@game.command("do")
@click.argument("name")
@click.argument("lines", nargs=-1, required=True)
@pass_env
def game_do(env: Env, name: str, lines: tuple[str, ...]) -> None:
    """Run command LINES in game NAME as the game master."""
    now = clock.now()
    with env.db.write(world=EXCLUSIVE) as s:
        g = find_game(s, name)
        if g is None:
            fail(f"no game named {name}")
        rules = get_rules(g.kind)
        commands = rules.parse([Line(i + 1, text) for i, text in enumerate(lines)])
        seed = secrets.token_hex(16)
        ctx = Context(now=now, rng=random.Random(int(seed, 16)), actor=Actor(handle=None, email=env.settings.gm_address, authenticated=True, is_gm=True), turn=g.turn, game_name=g.name)
        outcome = apply_commands(s, g, rules, commands, ctx, None, gm_actor="cli")
        mailer = env.mailer()
        mailer.send_notices(s, g, rules, outcome.notices, now)
        ok = True
        for r in outcome.results:
            message = r.message if r.ok else _gm_refusal(rules, g.name, r.text, r.message)
            click.echo(f"{'ok     ' if r.ok else 'REFUSED'} {r.text}: {message}")
            ok = ok and r.ok
        for sec in outcome.sections:
            title, text, _ = Composer(env.settings).section(sec, g.kind)
            click.echo(f"\n{title}\n{text}" if title else text)
        if mailer.queued:
            click.echo(_queued(mailer.queued))
    if not ok:
        sys.exit(1)


def _queued(n: int) -> str:
    """How many mails a command put in the outbox, counted one per recipient."""
    return f"{n} notice{'s' if n != 1 else ''} queued"


def _gm_refusal(rules: Rules[Any], game: str, text: str, message: str) -> str:
    """A refusal of a line `pbm game do` ran as the game master.  A game
    refuses a player's order from a sender without an account ("register
    first"), which the GM at the CLI is not: say instead that the GM holds no
    position, and name the GM line meant if there is one (KIOSK 500 ->
    GM KIOSK 500)."""
    if message != NOT_REGISTERED:
        return message
    said = (f"this is not a GM command of {rules.kind}: `pbm game do` runs lines as the game master, who holds "
            f"no position in {game}, so a player's order has no one to act for (players send their own orders; "
            f"`pbm game add-player {game} HANDLE` adds one)")
    meant = f"GM {text}"
    parsed = rules.parse([Line(1, meant)])
    if len(parsed) == 1 and parsed[0].error is None:
        return f"{said}; did you mean {meant!r}?"
    return said


def _desk(env: Env, name: str, op: DeskOp, *, read: bool = False) -> str:
    """Run ``op(session, game, mailer, now)`` on game NAME in one transaction."""
    ctx = env.db.read() if read else env.db.write(world=EXCLUSIVE)
    with ctx as s:
        g = find_game(s, name)
        if g is None:
            fail(f"no game named {name}")
        try:
            with undone(s):
                return op(s, g, env.mailer(), clock.now())
        except ServerRefused as exc:
            fail(str(exc))


@game.command("set")
@click.argument("name")
@click.argument("pairs", nargs=-1, required=True)
@pass_env
def game_set(env: Env, name: str, pairs: tuple[str, ...]) -> None:
    """Set server-side settings: early=on|off grace=DURATION remind=DURATION deadline=EXPR
    press=on|off|broadcast anonymous=on|off public_press=on|off seats=N|none notify=URL|off
    (alerts: prints the key of the signed JSON as "secret: HEX"; docs/operations.md "Alerts")."""
    from pbm_server.play import gmdesk

    def op(s: Session, g: Game, m: Mailer, now: datetime) -> str:
        said = gmdesk.change_settings(s, m, g, parse_kv(pairs), now, "cli")
        if g.notify_url and any(k.lower() == "notify" for k in parse_kv(pairs)):
            # the key of the signed generic JSON (X-PBM-Signature); pbm game show NAME shows it again
            said += f"\nsecret: {g.notify_secret}"
        return said

    click.echo(_desk(env, name, op))


@game.command("deadline")
@click.argument("name")
@click.argument("expr", nargs=-1, required=True)
@pass_env
def game_deadline(env: Env, name: str, expr: tuple[str, ...]) -> None:
    """Set the deadline (e.g. every Saturday 03:00 UTC) or 'none'."""
    from pbm_server.play import gmdesk

    click.echo(_desk(env, name, lambda s, g, m, now: gmdesk.change_deadline(s, m, g, " ".join(expr), now, "cli")))


@game.command("pause")
@click.argument("name")
@pass_env
def game_pause(env: Env, name: str) -> None:
    """Pause a game: no turns run, no orders are taken."""
    from pbm_server.play import gmdesk

    click.echo(_desk(env, name, lambda s, g, m, now: gmdesk.pause(s, m, g, now, "cli")))


@game.command("resume")
@click.argument("name")
@pass_env
def game_resume(env: Env, name: str) -> None:
    """Resume a paused game (next deadline: the first after now, never before the one it had)."""
    from pbm_server.play import gmdesk

    click.echo(_desk(env, name, lambda s, g, m, now: gmdesk.resume(s, m, g, now, "cli")))


@game.command("start")
@click.argument("name")
@pass_env
def game_start(env: Env, name: str) -> None:
    """Begin a game's ready check (ready=DURATION) now, with the players seated."""
    from pbm_server.play import readycheck

    click.echo(_desk(env, name, lambda s, g, m, now: readycheck.gm_start(s, m, g, now, "cli")))


@game.command("private")
@click.argument("name")
@click.option("--public", "public", is_flag=True, help="make its pages public again")
@pass_env
def game_private(env: Env, name: str, public: bool) -> None:
    """Take a game's public pages off the web (they answer 404); its players'
    own links still work.  --public puts them back."""

    def op(s: Session, g: Game, m: Mailer, now: datetime) -> str:
        g.private = not public
        audit(s, now, "cli", "game public" if public else "game private", g.name, g)
        return f"{g.name}'s pages are {'public' if public else 'private: they answer 404'}"

    click.echo(_desk(env, name, op))


@game.command("add-player")
@click.argument("name")
@click.argument("handle")
@click.argument("join_line", nargs=-1)
@pass_env
def game_add_player(env: Env, name: str, handle: str, join_line: tuple[str, ...]) -> None:
    """Join HANDLE to the game (JOIN_LINE: the game's join command, default JOIN)."""
    from pbm_server.play import gmdesk

    click.echo(_desk(env, name, lambda s, g, m, now: gmdesk.add_player(s, m, g, handle, " ".join(join_line) or None, now, "cli")))


@game.command("remove-player")
@click.argument("name")
@click.argument("handle")
@pass_env
def game_remove_player(env: Env, name: str, handle: str) -> None:
    """Take HANDLE out of the game (the game's LEAVE, on the player's behalf)."""
    from pbm_server.play import gmdesk

    click.echo(_desk(env, name, lambda s, g, m, now: gmdesk.remove_player(s, m, g, handle, now, "cli")))


@game.command("info")
@click.argument("name")
@click.argument("text", nargs=-1, required=True)
@pass_env
def game_info(env: Env, name: str, text: tuple[str, ...]) -> None:
    """Set the text players get for 'info NAME' by mail ('none' removes it)."""
    from pbm_server.play import roster

    click.echo(_desk(env, name, lambda s, g, m, now: roster.set_info(s, g, " ".join(text), now, "cli")))


@game.command("replace")
@click.argument("name")
@click.argument("old")
@click.argument("new")
@pass_env
def game_replace(env: Env, name: str, old: str, new: str) -> None:
    """Hand player OLD's position to the account NEW (a replacement player); both are told."""
    from pbm_server.play import roster

    click.echo(_desk(env, name, lambda s, g, m, now: roster.replace_player(s, m, g, old, new, now, "cli")))


@game.command("offer")
@click.argument("name")
@click.argument("seat")
@pass_env
def game_offer(env: Env, name: str, seat: str) -> None:
    """Offer player SEAT's seat to the players standing by ('available KIND'); the first 'take NAME' gets it."""
    from pbm_server.play import people

    click.echo(_desk(env, name, lambda s, g, m, now: people.offer(s, m, g, seat, now, "cli")))


@game.command("press")
@click.argument("name")
@click.option("--last", default=None, type=int, help="only the newest N messages")
@pass_env
def game_press(env: Env, name: str, last: int | None) -> None:
    """Every press message of game NAME, oldest first: when, from whom, to whom, the text
    (the game master sees the senders of anonymous press too)."""
    from pbm_server.play.press import listing

    with env.db.read() as s:
        g = find_game(s, name)
        if g is None:
            fail(f"no game named {name}")
        rows = listing(s, g, last)
        click.echo(f"{g.name}: press={g.press_mode} anonymous={'on' if g.press_anonymous else 'off'}; "
                   f"{len(rows)} message{'s' if len(rows) != 1 else ''}" + (f" (the newest {last})" if last else ""))
        for p in rows:
            to = "ALL (" + ", ".join(p.recipients) + ")" if p.to_all else ", ".join(p.recipients)
            flags = " [anonymous]" if p.anonymous else ""
            click.echo(f"\n#{p.id} {p.sent_at:%Y-%m-%d %H:%M} UTC from {p.sender} to {to}{flags}")
            for line in p.body.split("\n"):
                click.echo(f"  {line}")


@game.command("history")
@click.argument("name")
@click.argument("turn_no", required=False, type=int)
@click.option("--as", "viewer", default=None, help="the copy this player got")
@pass_env
def game_history(env: Env, name: str, turn_no: int | None, viewer: str | None) -> None:
    """The report of turn TURN_NO (default: the last) and the list of turns."""
    from pbm_server.play import views

    def op(s: Session, g: Game, m: Mailer, now: datetime) -> str:
        acc = account_by_handle(s, viewer) if viewer else None
        _, sections = views.history(s, g, turn_no, acc, is_gm=True)
        return "\n\n".join(f"{sec.title}\n{'=' * len(sec.title)}\n{sec.text}" for sec in sections)

    click.echo(_desk(env, name, op, read=True))


@main.command("audit")
@click.option("--game", "name", default=None, help="only this game's entries")
@click.option("--last", default=50, help="how many entries (newest last)")
@pass_env
def audit_log(env: Env, name: str | None, last: int) -> None:
    """The audit log: who did what, when."""
    from pbm_server.store.models import AuditEntry

    with env.db.read() as s:
        q = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(last)
        if name:
            g = find_game(s, name)
            if g is None:
                fail(f"no game named {name}")
            q = q.where(AuditEntry.game_id == g.id)
        for e in reversed(s.scalars(q).all()):
            click.echo(f"{e.at:%Y-%m-%d %H:%M:%S} {e.actor:16} {e.action:14} {e.detail}")


@main.group()
def turn() -> None:
    """Turn processing."""


@turn.command("run")
@click.argument("name")
@click.option("--turn", "expected", type=int, default=None, help="refuse unless the game is at this turn")
@pass_env
def turn_run(env: Env, name: str, expected: int | None) -> None:
    """Process the game's current turn now, as if its deadline had passed."""
    with env.db.write(world=EXCLUSIVE) as s:
        g = find_game(s, name)
        if g is None:
            fail(f"no game named {name}")
        try:
            rules = get_rules(g.kind)
            turn_no = g.turn
            mailer = env.mailer()
            outcome = run_turn(s, g, mailer, clock.now(), actor="cli", expected_turn=expected)
        except ServerRefused as exc:
            fail(str(exc))
        what = "processed" if outcome.turn_done else (
            f"not run: the game did not complete its turn ({why_not_done(outcome)}); "
            f"the deadline stays {show_time(g.next_deadline)}")
        click.echo(f"{g.name}: {rules.turn_name} {turn_no} {what}; {_queued(mailer.queued)}"
                   + ("; the game is finished" if g.status == "finished" else ""))


@turn.command("rollback")
@click.argument("name")
@click.argument("turn_no", type=int)
@click.option("--same-seed", is_flag=True,
              help="keep the turn's revealed seed and dice (to correct a GM error); no orders are taken until it runs")
@pass_env
def turn_rollback(env: Env, name: str, turn_no: int, same_seed: bool) -> None:
    """Return the game to the state before turn TURN_NO was processed (orders kept; players told).

    The turn gets a new seed, since its report revealed the old one; with
    --same-seed it keeps it and takes no orders until it has run again."""
    from pbm_server.play.turns import rollback, rollback_said

    def op(s: Session, g: Game, m: Mailer, now: datetime) -> str:
        rollback(s, g, m, turn_no, now, "cli", same_seed=same_seed)
        return rollback_said(g, turn_no, same_seed)

    click.echo(_desk(env, name, op))


@main.group()
def mail() -> None:
    """Mail intake and the queues."""


class _InjectCommand(click.Command):
    """``mail inject`` runs under an MTA: even a mistake in its command line
    (the pipe's argv) is a fault of ours, exit 75 with one line, so the MTA
    keeps the mail instead of bouncing it with a usage text."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            click.echo(f"pbm: mail inject: {exc.format_message().rstrip('.')} (check the MTA's pipe command)", err=True)
            sys.exit(EX_TEMPFAIL)


def _inject_log(env: Env, exc: BaseException) -> None:
    """Append the traceback of a fault of ours to PBM_INJECT_LOG, if set (the
    MTA only ever sees one line)."""
    import os
    import traceback

    path = env.settings.inject_log if env._loaded is not None else os.environ.get("PBM_INJECT_LOG", "")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"--- {clock.now():%Y-%m-%d %H:%M:%S} UTC pbm mail inject (pid {os.getpid()})\n")
            fh.write("".join(traceback.format_exception(exc)))
    except OSError:
        pass


def _inject_refusal(env: Env, rcpts: tuple[str, ...]) -> str | None:
    """Why a recipient cannot be delivered to (the MTA bounces with it), or None."""
    from pbm_server.mail import bounces

    domain = env.settings.domain.lower()
    for rcpt in rcpts:
        local, at, dom = rcpt.strip().strip("<>").rpartition("@")
        local = local.lower()
        if not at or not local or dom.lower() != domain:
            return f"{rcpt}: not an address of {domain}; this server relays nothing"
        if local in ("pbm", "postmaster"):
            continue
        with env.db.read() as s:
            if bounces.is_bounce_local(local):
                if bounces.outbox_id_of(bounces.read_key(s), local) is None:
                    return f"{rcpt}: not a return path of this server"
            elif find_game(s, local) is None:
                return f"{rcpt}: no game named {local} here; mail pbm@{domain} with 'games' for the list"
    return None


@mail.command("inject", cls=_InjectCommand)
@click.option("--from", "mail_from", default=None, help="envelope sender (Postfix: ${sender}; default: the From header)")
@click.option("--to", "rcpts", multiple=True, help="envelope recipient (Postfix: ${recipient}; default: pbm@DOMAIN or the To header)")
@pass_env
def mail_inject(env: Env, mail_from: str | None, rcpts: tuple[str, ...]) -> None:
    """Store one RFC 5322 message from standard input (MTA pipe delivery).

    Exit 0: stored; 65 (EX_DATAERR): not a message, or too large; 67
    (EX_NOUSER): no such game or address here; the MTA bounces both with the
    one line on standard error.  75 (EX_TEMPFAIL): a fault of ours (settings,
    database): the MTA keeps the mail and tries again; the traceback, if any,
    goes to PBM_INJECT_LOG."""
    env.fault_code = EX_TEMPFAIL
    env.one_line = True
    try:
        code, message = _inject(env, mail_from, rcpts)
    except SystemExit:
        raise
    except Exception as exc:
        _inject_log(env, exc)
        click.echo(f"pbm: could not store the message: {type(exc).__name__}: {_first_line(exc)}; "
                   "the MTA should try again later", err=True)
        sys.exit(EX_TEMPFAIL)
    if code:
        # the MTA bounces with this line, which may echo a recipient from the mail's To:
        # one line of ASCII, anything else escaped (as the listener's replies: printable.py)
        click.echo(f"pbm: {printable(message, ascii_only=True)}", err=True)
        sys.exit(code)
    click.echo(message)


def _inject(env: Env, mail_from: str | None, rcpts: tuple[str, ...]) -> tuple[int, str]:
    from email import policy
    from email.parser import BytesHeaderParser
    from email.utils import getaddresses

    settings = env.settings
    raw = sys.stdin.buffer.read(settings.max_message_bytes + 1)
    if len(raw) > settings.max_message_bytes:
        return EX_DATAERR, f"message larger than {settings.max_message_bytes} bytes refused"
    if not raw.strip():
        return EX_DATAERR, "empty message refused: standard input held no mail"
    head = BytesHeaderParser(policy=policy.compat32).parsebytes(raw)
    if not head.keys():
        return EX_DATAERR, "not a mail: it does not start with header fields (RFC 5322)"
    if mail_from is None:
        found = getaddresses([str(head.get("Return-Path", "") or head.get("From", ""))])
        mail_from = found[0][1] if found else ""
    if is_null_sender(mail_from):
        mail_from = ""  # the null sender (Postfix's pipe writes it as MAILER-DAEMON): never answered
    if not rcpts:
        dom = "@" + settings.domain.lower()
        tos = [a for _, a in getaddresses([str(head.get("To", "")), str(head.get("Cc", ""))]) if a.lower().endswith(dom)]
        rcpts = tuple(tos) or (settings.server_address,)
    refusal = _inject_refusal(env, rcpts)
    if refusal is not None:
        return EX_NOUSER, refusal
    (inbox_id,) = store_messages(env.db, [(mail_from, [r.strip().strip("<>") for r in rcpts], raw)])
    return 0, f"stored as {inbox_id}"


@mail.command("send")
@click.option("--from", "frm", required=True, help="your address")
@click.option("--to", "to", required=True, help="e.g. pbm@pbm.localhost or GAME@pbm.localhost")
@click.option("--subject", default="commands")
@click.option("--server", default=None, help="host:port of the listener (default PBM_LISTEN)")
@click.argument("lines", nargs=-1, required=True)
@pass_env
def mail_send(env: Env, frm: str, to: str, subject: str, server: str | None, lines: tuple[str, ...]) -> None:
    """Send a command mail to a pbm listener over SMTP (one LINE per command)."""
    import smtplib
    from email.message import EmailMessage
    from email.utils import make_msgid

    host, _, port = (server or env.settings.listen).rpartition(":")
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = frm, to, subject
    msg["Message-ID"] = make_msgid()
    msg.set_content("\n".join(lines) + "\n")
    try:
        with smtplib.SMTP(host.strip("[]"), int(port), timeout=30) as smtp:
            smtp.send_message(msg)
    except (OSError, smtplib.SMTPException) as exc:
        fail(f"could not send: {exc}")
    click.echo(f"sent {msg['Message-ID']} to {to}")


@mail.command("show")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--last", "last", default=3, show_default=True, help="how many of the newest mails in the Maildir")
@click.option("--to", "to", default=None, help="only mails to this address")
@click.option("--html", is_flag=True, help="print the HTML part instead of the text part")
@pass_env
def mail_show(env: Env, files: tuple[str, ...], last: int, to: str | None, html: bool) -> None:
    """Print mails the server wrote to its Maildir (PBM_MAILDIR), decoded.

    Without FILES: the newest --last mails, oldest first.  Headers are decoded
    (RFC 2047) and the body shown as text, whatever its transfer encoding."""
    from email import policy
    from email.parser import BytesParser
    from pathlib import Path

    parser = BytesParser(policy=policy.default)
    if files:
        paths = [Path(f) for f in files]
    else:
        box = Path(env.settings.maildir)
        paths = [p for sub in ("new", "cur") if (box / sub).is_dir() for p in (box / sub).iterdir() if p.is_file()]
        if not paths:
            fail(f"no mail in the Maildir {box}", 1)
        paths.sort(key=lambda p: (p.stat().st_mtime, p.name))
    picked = []
    for path in reversed(paths):
        with open(path, "rb") as fh:
            msg = parser.parse(fh)
        if to and to.lower() not in str(msg.get("To", "")).lower():
            continue
        picked.append((path, msg))
        if not files and len(picked) >= last:
            break
    for path, msg in reversed(picked):
        part = msg.get_body(preferencelist=("html", "plain") if html else ("plain", "html"))
        body = part.get_content() if part is not None else ""
        head = "\n".join(f"{h}: {msg[h]}" for h in ("From", "To", "Subject", "Date") if msg[h] is not None)
        click.echo(f"==> {path}\n{head}\n\n{body.rstrip()}\n")
    shown = len(picked)
    if shown == 0:
        fail("no mail matched", 1)


@mail.command("status")
@click.option("--json", "as_json", is_flag=True, help="print the same as one JSON object (for scripts)")
@pass_env
def mail_status(env: Env, as_json: bool) -> None:
    """Why mail waits: the inbox and outbox by state, what waits longest, the
    relay's last answer, the last errors with their rows, bounces and holds."""
    with env.db.read() as s:
        st = queue_status(s, env.settings.relay)
    if as_json:
        click.echo(json.dumps(st.as_json(), indent=2, sort_keys=True))
        return
    for line in _status_lines(st, clock.now()):
        click.echo(line)


def _ago(now: datetime, then: datetime | None) -> str:
    """A time, and how far it is from now ("12 s ago", "in 3 min")."""
    if then is None:
        return "never"
    seconds = int(abs((now - then).total_seconds()))
    span = f"{seconds} s" if seconds < 120 else f"{seconds // 60} min" if seconds < 7200 else f"{seconds // 3600} h"
    return f"{then:%Y-%m-%d %H:%M:%S} UTC ({span} ago)" if then <= now else f"{then:%Y-%m-%d %H:%M:%S} UTC (in {span})"


def _status_lines(st: QueueStatus, now: datetime) -> list[str]:
    w = st.waiting
    lines = [f"{label}: " + (", ".join(f"{state} {n}" for state, n in counts.items()) or "empty")
             for label, counts in (("inbox", st.inbox), ("outbox", st.outbox))]
    lines.append(f"oldest mail not yet handled: {_ago(now, w.oldest_new_at)}" if w.oldest_new_at
                 else "oldest mail not yet handled: none, every mail is handled")
    lines.append(f"oldest reply not yet delivered: {_ago(now, w.oldest_pending_at)}" if w.oldest_pending_at
                 else "oldest reply not yet delivered: none, the outbox is delivered")
    r = st.relay
    accepted = f"last mail accepted {_ago(now, r.last_accepted_at)}" + (
        f", outbox {r.last_accepted_id}" if r.last_accepted_id else "")
    lines.append(f"relay {r.relay}: {accepted}")
    if r.last_fault_at is not None:
        state = "FAILING NOW, mail is kept" if r.failing else "over, mail has gone out since"
        lines.append(f"relay last fault {_ago(now, r.last_fault_at)}, {state}: {r.last_fault}")
    if st.mailbox is not None:
        m = st.mailbox
        lines.append(f"mailbox {m.mailbox}: last read {_ago(now, m.last_read_at)}")
        if m.fault_since is not None:
            lines.append(f"mailbox FAILING since {_ago(now, m.fault_since)}, mail waits there: {m.fault}")
    lines += [f"shunted inbox {p.id} from {p.address}: {p.error}; retry: pbm mail retry {p.id}" for p in st.shunted]
    lines += [f"failed outbox {p.id} to {p.address} after {p.attempts} attempt(s): {p.error}; "
              f"retry: pbm mail retry --outbox {p.id}" for p in st.failed]
    lines += [f"retrying outbox {p.id} to {p.address}, attempt {p.attempts}, next {_ago(now, p.next_attempt_at)}: "
              f"{p.error}" for p in st.retrying]
    lines += [f"bounced outbox {p.id} to {p.address}: {p.error}" for p in st.bounced]
    lines += [f"on hold {address} since {since:%Y-%m-%d %H:%M} UTC: {reason}; lift: pbm mail unhold {address}"
              for address, since, reason in st.holds]
    return lines


@mail.command("unhold")
@click.argument("address")
@pass_env
def mail_unhold(env: Env, address: str) -> None:
    """Send mail to ADDRESS again after it was put on hold for bounces.

    Mail already held stays unsent; the next mails go out."""
    from pbm_server.mail.bounces import lift_hold

    with env.db.write(world=EXCLUSIVE) as s:
        if not lift_hold(s, address, clock.now(), "cli", "pbm mail unhold"):
            fail(f"{address.lower()} is not on hold (pbm mail status lists the held addresses)")
    click.echo(f"{address.lower()} is no longer on hold: the next mails to it are sent")


@mail.command("retry")
@click.argument("row_id", metavar="[ID]", type=int, required=False)
@click.option("--outbox", is_flag=True, help="ID is an outbox row (a failed mail to send again), not an inbox row")
@click.option("--address", default=None, help="every failed outbox mail to this address (implies --outbox)")
@click.option("--all-failed", is_flag=True, help="every failed outbox mail (implies --outbox)")
@pass_env
def mail_retry(env: Env, row_id: int | None, outbox: bool, address: str | None, all_failed: bool) -> None:
    """Queue a mail again after the fault is fixed.

    pbm mail retry ID: the shunted inbox mail ID is processed again.
    pbm mail retry --outbox ID | --address ADDR | --all-failed: failed
    outbox mails are delivered again, with their attempts and retry period
    started afresh (`pbm mail status` lists them)."""
    if address is not None or all_failed:
        outbox = True
    if not outbox:
        if row_id is None:
            fail("give the ID of a shunted inbox mail, or --outbox with ID, --address ADDR or --all-failed "
                 "(pbm mail status lists both)", EX_USAGE)
        _retry_inbox(env, row_id)
        return
    if sum((row_id is not None, address is not None, all_failed)) != 1:
        fail("--outbox takes one of: an outbox ID, --address ADDR, --all-failed", EX_USAGE)
    now = clock.now()
    with env.db.write(world=EXCLUSIVE) as s:
        query = select(OutboundMail).where(OutboundMail.status == "failed")
        if row_id is not None:
            row = s.get(OutboundMail, row_id)
            if row is None or row.status != "failed":
                shown = "no such row" if row is None else f"it is {row.status}"
                fail(f"outbox {row_id} is not a failed mail ({shown}); only failed mails are queued again "
                     "(pbm mail status lists them)")
            query = query.where(OutboundMail.id == row_id)
        elif address is not None:
            query = query.where(func.lower(OutboundMail.to_addr) == address.strip().lower())
        ids: list[int] = []
        for row in s.scalars(query.order_by(OutboundMail.id)).all():
            # the retry period counts from created_at: it starts again now
            row.status, row.attempts, row.next_attempt_at, row.created_at = "pending", 0, now, now
            row.claimed_by = row.claimed_until = None
            ids.append(row.id)
        if ids:
            audit(s, now, "cli", "mail retry", "outbox " + " ".join(map(str, ids))[:2000])
    if not ids:
        whom = f" to {address.strip().lower()}" if address is not None else ""
        fail(f"no failed outbox mail{whom}: nothing queued (pbm mail status lists the failed mails)")
    click.echo(f"{len(ids)} failed outbox mail{'s' if len(ids) != 1 else ''} queued again: "
               + ", ".join(map(str, ids[:20])) + (" ..." if len(ids) > 20 else ""))


def _retry_inbox(env: Env, inbox_id: int) -> None:
    """Put a shunted mail back in the queue."""
    with env.db.write(world=EXCLUSIVE) as s:
        row = s.get(InboundMail, inbox_id)
        if row is None or row.status != "shunted":
            fail(f"inbox {inbox_id} is not a shunted mail")
        row.status, row.note = "new", None
        audit(s, clock.now(), "cli", "mail retry", str(inbox_id))
    click.echo(f"inbox {inbox_id} queued again")


if __name__ == "__main__":
    main()

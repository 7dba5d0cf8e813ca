"""A player's own alerts, by mail to pbm@DOMAIN: ``notify URL`` and
``notify off`` (mail/alerts.py posts them; play/alerting.py says which)."""

from __future__ import annotations

from games.base import Line, Result
from pbm_server.base.errors import ServerRefused
from pbm_server.commands.registry import Audience, ServerContext, command
from pbm_server.mail import alerts

USAGE = ("expected: notify URL (a Discord or Slack webhook, an ntfy topic such as https://ntfy.sh/TOPIC, or any "
         "https:// URL for signed JSON; ntfy+https://... for your own ntfy server), notify off, or notify alone "
         "to see where your alerts go")


@command("notify", Audience.PLAYER,
         ("notify URL", "alerts of your games (turn processed, your orders missing, your move, start and end) "
                        "posted to URL: a Discord or Slack webhook, ntfy, or signed JSON"),
         ("notify off", "no more alerts"))
def cmd_notify(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    acc = ctx.player()
    if len(words) == 1:
        if not acc.notify_url:
            return Result(line, True, "you have no alerts; " + USAGE)
        where = alerts.parse_target(acc.notify_url).where
        stopped = f" -- STOPPED ({acc.notify_error}); send notify URL again to restart them" if acc.notify_error else ""
        return Result(line, True, f"your alerts go to {where}{stopped}")
    if len(words) != 2:
        raise ServerRefused(USAGE)
    if words[1].lower() in ("off", "none", "stop"):
        had = bool(acc.notify_url)
        acc.notify_url = acc.notify_secret = acc.notify_error = None
        ctx.audit.append(("notify", f"{acc.handle}: off"))
        return Result(line, True, "your alerts are off" if had else "you had no alerts; nothing changed")
    try:
        target = alerts.check_url(words[1], ctx.settings)
    except ServerRefused as exc:
        raise ServerRefused(f"that URL is refused: {exc}; nothing was changed") from None
    prefixed = words[1].lower().startswith(target.format + "+")
    acc.notify_url = (f"{target.format}+" if prefixed else "") + target.url
    acc.notify_error = None
    ctx.audit.append(("notify", f"{acc.handle}: {target.where}"))
    said = f"alerts of your games now go to {target.where} ({target.format} format)"
    if target.format == "json" and not acc.notify_secret:
        # made once, shown this once: notify off, then notify URL, makes a new one
        acc.notify_secret = alerts.new_secret()
        said += (f". They are signed: X-PBM-Signature: sha256=HMAC-SHA256 of the body with the key "
                 f"{acc.notify_secret} (shown this once; notify off and then notify URL make a new key)")
    return Result(line, True, said)

"""The one refusal of the server's operations: a request that cannot be done."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.orm import Session


class ServerRefused(Exception):
    """A pbm@ command or CLI request that cannot be done; ``str(exc)`` is the
    reason.  Raise it before changing anything, or inside :func:`undone`.  The
    pbm@ side turns it into the line's refusal in one place (the registry's
    dispatch); the CLI prints it as its one line.  (A game's own commands
    refuse with ``games.base.Refused``.)"""


@contextmanager
def undone(session: Session, *, always: bool = False) -> Iterator[None]:
    """Run the block in a savepoint: a refusal raised in it undoes the block,
    and its reason says that nothing was changed (``always``: even when the
    reason mentions "nothing" already)."""
    try:
        with session.begin_nested():
            yield
    except ServerRefused as exc:
        text = str(exc)
        raise ServerRefused(text if "nothing" in text and not always else f"{text}; nothing was changed") from None

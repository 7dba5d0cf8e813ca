"""Turn seeds and the random stream of a turn (docs/randomness.md).

A turn's seed is drawn when the turn opens and only its SHA-256 is published;
every draw of the turn comes from one generator seeded with it, and the seed
is revealed after the turn ran, so anyone can replay the turn's dice.
"""

from __future__ import annotations

import hashlib
import random
import secrets

from pbm_server.store.models import Game


def new_seed() -> str:
    return secrets.token_hex(32)


def seed_hash(seed_hex: str) -> str:
    return hashlib.sha256(bytes.fromhex(seed_hex)).hexdigest()


def rng_from_seed(seed_hex: str) -> random.Random:
    return random.Random(int.from_bytes(bytes.fromhex(seed_hex), "big"))


def turn_rng(game: Game) -> random.Random:
    """The open turn's random stream, where the last mail or run left it.

    Every random draw of a turn -- the dice of the mails that arrive during
    it and those of the turn run itself -- comes, in order, from one
    generator seeded with the turn seed; so once the seed is revealed anyone
    can replay every draw of the turn (docs/randomness.md)."""
    rng = rng_from_seed(game.turn_seed)
    if game.rng_state:
        version, internal, gauss = game.rng_state
        rng.setstate((version, tuple(internal), gauss))
    return rng


def fresh_rng() -> random.Random:
    """A generator for a game without turns (curio): nothing is committed or
    revealed for it, so each use gets 256 fresh bits from the OS (secrets),
    and no output of one use tells anything about the next."""
    return random.Random(secrets.randbits(256))


def keep_rng(game: Game, rng: random.Random) -> None:
    version, internal, gauss = rng.getstate()
    stored = [version, list(internal), gauss]
    if stored != game.rng_state:
        game.rng_state = stored

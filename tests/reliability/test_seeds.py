"""Seeds that decide hidden information (issue 14, item 3).

A curio board's hidden layout comes from a seed the game draws from the
generator the server hands it.  curio has no turns, so nothing about that
generator is ever committed or revealed: the server gives it fresh OS
randomness (``secrets``) on every use, rather than one long Mersenne Twister
stream whose outputs -- the board seeds -- follow from each other and from
the stored stream seed."""

from __future__ import annotations

import random


def test_curio_board_seeds_come_from_fresh_os_randomness(pbm):
    pbm.register("alice", "alice-secret-1")
    pbm.register("bob", "bob-secret-22")
    for _ in range(3):
        assert "started" in pbm.flat(pbm.mail("alice@example.org", "pbm", "curio challenge alice bob $$alice-secret-1$$"))
    seed_hex, rng_state = pbm.sql("SELECT turn_seed, rng_state FROM games WHERE name = 'curio'")[0]
    boards = pbm.state("curio")["boards"]
    seeds = [boards[k]["seed"] for k in sorted(boards, key=int)]
    assert len(seeds) == 3 and len(set(seeds)) == 3
    # wide enough that trying every seed from a first board mail is hopeless
    assert sum(s.bit_length() for s in seeds) > 3 * 120
    # the stored stream seed does not give the boards' seeds ...
    stream = random.Random(int.from_bytes(bytes.fromhex(seed_hex), "big"))
    assert [stream.getrandbits(128) for _ in range(3)] != seeds
    assert not any(stream.getrandbits(128) in seeds for _ in range(1000))
    # ... and no stream position is kept for a game without turns
    assert rng_state is None

"""Ring detection against a brute-force enumeration of every cycle."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from games.giveaway.rings import TANGLE_LOOPS, find_rings, simple_cycles, strongly_connected

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb

A, B, C, D, E, F = range(6)


def graph(n: int, gifts: list[tuple[int, int, int]]) -> list[dict[int, int]]:
    out: list[dict[int, int]] = [{} for _ in range(n)]
    for u, v, x in gifts:
        out[u][v] = x
    return out


# -- the reference: every simple cycle, then the rule read literally ----------------
def all_cycles(out: list[dict[int, int]]) -> set[tuple[int, ...]]:
    """Every simple directed cycle, rotated to start at its lowest node."""
    found: set[tuple[int, ...]] = set()

    def walk(start: int, v: int, path: list[int]) -> None:
        for w in out[v]:
            if w == start:
                found.add(tuple(path))
            elif w > start and w not in path:
                walk(start, w, path + [w])

    for s in range(len(out)):
        walk(s, s, [s])
    return found


def literal(out):
    """(valid rings, broken rings of 3+) by rules 5 and 6 as the ruling states them."""
    valid, broken = set(), set()
    for cyc in all_cycles(out):
        k = len(cyc)
        amounts = {out[cyc[i]][cyc[(i + 1) % k]] for i in range(k)}
        if len(amounts) != 1:
            continue
        x = amounts.pop()
        members = set(cyc)
        cycle_gifts = {(cyc[i], cyc[(i + 1) % k]) for i in range(k)}
        extra = tuple(
            sorted((u, v, out[u][v]) for u in cyc for v in out[u] if v in members and (u, v) not in cycle_gifts)
        )
        if extra:
            broken.add((x, cyc, extra))
        else:
            valid.add((x, cyc))
    return valid, broken


def circle_loops(out, ring: tuple[int, ...], x: int) -> int:
    """Loops of the ring's circle: x-gifts not answered by a gift back, players
    reachable both ways from the ring, gifts among them minus players plus one."""
    edges = {(u, v) for u in range(len(out)) for v, a in out[u].items() if a == x and u not in out[v]}

    def reach(start, forward):
        seen, todo = {start}, [start]
        while todo:
            v = todo.pop()
            for u, w in edges:
                a, b = (u, w) if forward else (w, u)
                if a == v and b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen

    circle = reach(ring[0], True) & reach(ring[0], False)
    inside = [(u, v) for u, v in edges if u in circle and v in circle]
    return len(inside) - len(circle) + 1


def expected_rings(out, limit):
    valid, _ = literal(out)
    return {(x, cyc) for x, cyc in valid if len(cyc) == 2 or circle_loops(out, cyc, x) <= limit}


def rings_of(analysis):
    return {(r.amount, r.members) for r in analysis.rings}


# -- random small gift graphs ---------------------------------------------------------
@st.composite
def gift_graphs(draw, max_players=7, amounts=(0, 0, 0, 1, 1, 2)):
    n = draw(st.integers(2, max_players))
    out: list[dict[int, int]] = [{} for _ in range(n)]
    for u in range(n):
        for v in range(n):
            if u != v:
                x = draw(st.sampled_from(amounts))
                if x:
                    out[u][v] = x
    return out


@settings(max_examples=400, deadline=None)
@given(gift_graphs())
def test_unlimited_search_equals_brute_force(out):
    valid, broken = literal(out)
    got = find_rings(out, tangle_loops=None)
    assert rings_of(got) == valid
    assert {(b.amount, b.members, b.breakers) for b in got.broken} == broken
    assert got.tangles == []


@settings(max_examples=400, deadline=None)
@given(gift_graphs(), st.integers(1, 4))
def test_tangle_rule_equals_brute_force(out, limit):
    got = find_rings(out, tangle_loops=limit)
    assert rings_of(got) == expected_rings(out, limit)
    _, broken = literal(out)
    # every broken ring the report lists is a real one, with all its breakers
    assert {(b.amount, b.members, b.breakers) for b in got.broken} <= broken


@settings(max_examples=200, deadline=None)
@given(gift_graphs(max_players=8, amounts=(0, 0, 0, 0, 1)))
def test_default_limit_on_sparse_graphs_is_exact(out):
    """Small sparse graphs never reach the default limit: the result is rule 6 exactly."""
    valid, _ = literal(out)
    if all(circle_loops(out, cyc, x) <= TANGLE_LOOPS for x, cyc in valid if len(cyc) > 2):
        assert rings_of(find_rings(out)) == valid


@settings(max_examples=200, deadline=None)
@given(gift_graphs())
def test_bonuses_are_sums_over_rings(out):
    got = find_rings(out, tangle_loops=None)
    bonus = got.bonuses(len(out))
    for p in range(len(out)):
        assert bonus[p] == sum(x * (len(cyc) - 1) for x, cyc in literal(out)[0] if p in cyc)


@settings(max_examples=200, deadline=None)
@given(gift_graphs(amounts=(0, 1)))
def test_simple_cycles_lists_every_cycle_of_a_component(out):
    succ = {u: list(vs) for u, vs in enumerate(out) if vs}
    for comp in strongly_connected(succ):
        members = set(comp)
        inner = {u: [v for v in succ[u] if v in members] for u in comp}
        if len(comp) < 2:
            continue
        listed = list(simple_cycles(inner))
        assert len(listed) == len(set(listed))
        assert set(listed) == {c for c in all_cycles(out) if set(c) <= members}


# -- the cases the rules spell out ---------------------------------------------------
def test_seed_rule6_example():
    """A->B 1, B->A 1, B->C 1, C->A 1: ring A-B, no ring A-B-C (broken by B->A)."""
    got = find_rings(graph(3, [(A, B, 1), (B, A, 1), (B, C, 1), (C, A, 1)]))
    assert rings_of(got) == {(1, (A, B))}
    assert [(b.amount, b.members, b.breakers) for b in got.broken] == [(1, (A, B, C), ((B, A, 1),))]


def test_two_three_and_six_player_rings():
    got = find_rings(graph(6, [(A, B, 2), (B, A, 2), (C, D, 1), (D, E, 1), (E, C, 1)]))
    assert rings_of(got) == {(2, (A, B)), (1, (C, D, E))}
    assert got.bonuses(6) == [2, 2, 2, 2, 2, 0]
    six = find_rings(graph(6, [(i, (i + 1) % 6, 3) for i in range(6)]))
    assert rings_of(six) == {(3, (A, B, C, D, E, F))}
    assert six.bonuses(6) == [15] * 6


def test_unequal_amounts_make_no_ring():
    got = find_rings(graph(3, [(A, B, 1), (B, C, 2), (C, A, 1), (B, A, 2)]))
    assert rings_of(got) == set()
    assert got.broken == []


def test_one_extra_gift_breaks_a_ring():
    got = find_rings(graph(4, [(A, B, 3), (B, C, 3), (C, D, 3), (D, A, 3), (A, C, 1)]))
    assert rings_of(got) == set()
    assert [(b.members, b.breakers) for b in got.broken] == [((A, B, C, D), ((A, C, 1),))]


def test_gifts_to_and_from_outsiders_do_not_break_a_ring():
    got = find_rings(graph(5, [(A, B, 1), (B, C, 1), (C, A, 1), (A, D, 1), (E, B, 1), (D, E, 4)]))
    assert rings_of(got) == {(1, (A, B, C))}


def test_two_rings_sharing_a_gift_both_pay():
    got = find_rings(graph(4, [(A, B, 1), (B, C, 1), (C, A, 1), (B, D, 1), (D, A, 1)]))
    assert rings_of(got) == {(1, (A, B, C)), (1, (A, B, D))}
    assert got.bonuses(4) == [4, 4, 2, 2]


def test_two_player_ring_inside_a_bigger_circle():
    # A<->B 1 and a 3-ring C-D-E of 1 with B->C and E->A linking them into one circle
    got = find_rings(graph(5, [(A, B, 1), (B, A, 1), (C, D, 1), (D, E, 1), (E, C, 1), (B, C, 1), (E, A, 1)]))
    assert (1, (A, B)) in rings_of(got) and (1, (C, D, E)) in rings_of(got)


def diamonds(m: int) -> list[dict[int, int]]:
    """s0 -> a1, b1 -> s1 -> a2, b2 -> s2 ... -> s0: 2**m chordless cycles."""
    gifts = []
    n = 3 * m
    for i in range(m):
        s, a, b, t = 3 * i, 3 * i + 1, 3 * i + 2, (3 * i + 3) % n
        gifts += [(s, a, 1), (s, b, 1), (a, t, 1), (b, t, 1)]
    return graph(n, gifts)


def test_a_few_branches_are_searched_completely():
    got = find_rings(diamonds(3))  # 4 loops
    assert len(got.rings) == 8
    assert got.tangles == []


def test_a_tangle_forms_no_ring_of_three_or_more():
    out = diamonds(TANGLE_LOOPS)  # TANGLE_LOOPS + 1 loops
    got = find_rings(out)
    assert got.rings == []
    assert [(t.amount, len(t.members), t.loops) for t in got.tangles] == [(1, 3 * TANGLE_LOOPS, TANGLE_LOOPS + 1)]
    assert len(find_rings(out, tangle_loops=None).rings) == 2**TANGLE_LOOPS


def test_two_player_rings_form_inside_a_tangle():
    out = diamonds(TANGLE_LOOPS)
    a1, s1 = 1, 3
    out[s1][a1] = 1  # a1 -> s1 answered by s1 -> a1
    got = find_rings(out)
    assert (1, (a1, s1)) in rings_of(got)


def test_answered_gifts_do_not_count_as_loops():
    """A 6-ring whose members each also swap gifts with many partners is still a ring."""
    gifts = [(i, (i + 1) % 6, 2) for i in range(6)]
    partner = 6
    for i in range(6):
        for _ in range(4):
            gifts += [(i, partner, 2), (partner, i, 2)]
            partner += 1
    got = find_rings(graph(partner, gifts))
    assert (2, (A, B, C, D, E, F)) in rings_of(got)
    assert len(got.rings) == 1 + 24


def test_large_random_graph_runs_and_finds_planted_rings():
    import random

    rng = random.Random(5)
    n = 3000
    out: list[dict[int, int]] = [{} for _ in range(n)]
    for u in range(2400):
        for _ in range(rng.randint(1, 3)):
            v = rng.randrange(n)
            if v != u:
                out[u][v] = rng.randint(1, 3)
    # planted: players 2400.. in rings of 5 passing 7, giving nothing else
    planted = set()
    for start in range(2400, 3000, 5):
        ring = tuple(range(start, start + 5))
        for i, u in enumerate(ring):
            out[u] = {ring[(i + 1) % 5]: 7}
        planted.add((7, ring))
    got = find_rings(out)
    assert planted <= rings_of(got)

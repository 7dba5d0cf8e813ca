"""Co-operation rings (rules 5 and 6) found in a round's gift graph.

Players are numbered 0..n-1; ``out[u]`` maps each player ``u`` gives to onto
the (summed) amount.  A *ring* of amount ``x`` is a directed cycle of k >= 2
players, every gift on it exactly ``x`` points, such that the gifts between
its members are exactly the cycle's gifts (rule 6).

Why not simply list every cycle: the number of cycles, and even of valid
rings, can grow exponentially with the number of players (a chain of
"diamonds" A->B, A->C, B->D, C->D, D->... doubles them at every link), and
deciding whether a given player lies on any chordless cycle is NP-complete.
So the server reads the rule as follows (docs/games/giveaway.md explains it
to players):

* Two players who give each other the same amount always form a ring (there
  can be no other gift between just the two of them).
* Rings of three or more are looked for per amount ``x`` inside *circles*:
  strongly connected groups of the x-gift graph.  A circle's *loops* are its
  gifts minus its players plus one (1 for a plain cycle).  Gifts answered by
  any gift back can never lie on a valid ring of three or more (the answer is
  a gift between members), so they are left out when the loops are counted.
  A circle with more than ``tangle_loops`` loops counted that way is a
  *tangle*: no ring of three or more forms in it.  Every other circle is
  searched completely, so there the result is exactly rule 6.

Cost: Tarjan's algorithm per amount, O(players + gifts).  A circle with at
most L loops has at most 2(L - 1) players who give or receive more than one
x-gift inside it; the other members are chained between those, so the
search runs on a graph of at most 2(L-1) nodes and 3(L-1) edges and meets at
most 2**L - 1 cycles, whatever the number of members.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

#: a circle with more loops than this (gifts answered by a gift back left out)
#: is a tangle: no ring of three or more players forms in it.
TANGLE_LOOPS = 8

Gifts = list[dict[int, int]]  # out[giver] = {receiver: amount}


@dataclass(frozen=True)
class Ring:
    """A valid ring: ``members`` in gift order (each gives ``amount`` to the next,
    the last to the first), starting with the lowest player number."""

    amount: int
    members: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def bonus(self) -> int:
        """Extra points each member receives: x * k instead of x."""
        return self.amount * (self.size - 1)


@dataclass(frozen=True)
class BrokenRing:
    """A cycle of equal gifts that rule 6 broke; ``breakers`` are the other gifts
    between its members as (giver, receiver, amount)."""

    amount: int
    members: tuple[int, ...]
    breakers: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class Tangle:
    """A circle of x-gifts with too many loops to hold rings of three or more."""

    amount: int
    members: tuple[int, ...]  # sorted
    loops: int


@dataclass
class RingAnalysis:
    rings: list[Ring] = field(default_factory=list)
    broken: list[BrokenRing] = field(default_factory=list)
    tangles: list[Tangle] = field(default_factory=list)

    def bonuses(self, n: int) -> list[int]:
        """Ring bonus per player: every valid ring pays each member x * (k - 1)."""
        bonus = [0] * n
        for ring in self.rings:
            for m in ring.members:
                bonus[m] += ring.bonus
        return bonus


def find_rings(out: Gifts, tangle_loops: int | None = TANGLE_LOOPS) -> RingAnalysis:
    """All valid rings, the broken ones examined, and the tangles.

    ``tangle_loops=None`` searches every circle however tangled (exponential in
    the worst case: for tests against a brute-force enumerator only)."""
    result = RingAnalysis()
    by_amount: dict[int, dict[int, list[int]]] = {}
    for u, gifts in enumerate(out):
        for v, x in gifts.items():
            # Two-player rings: equal gifts both ways.
            if u < v and out[v].get(u) == x:
                result.rings.append(Ring(x, (u, v)))
            succ = by_amount.get(x)
            if succ is None:
                by_amount[x] = {u: [v]}
            else:
                vs = succ.get(u)
                if vs is None:
                    succ[u] = [v]
                else:
                    vs.append(v)

    for x in sorted(by_amount):
        succ = by_amount[x]
        for comp in strongly_connected(succ):
            if len(comp) < 3:
                continue  # a pair of players: only the two-player ring above
            members = set(comp)
            inner = {u: [v for v in succ[u] if v in members] for u in comp}
            if tangle_loops is None or _loops(inner) <= tangle_loops:
                _search(x, inner, out, result, skip_pairs=True)
                continue
            # Too many loops even to list the broken cycles: leave out the gifts
            # answered by a gift back and look again.
            pruned = {u: [v for v in vs if u not in out[v]] for u, vs in inner.items()}
            pruned = {u: vs for u, vs in pruned.items() if vs}
            for sub in strongly_connected(pruned):
                if len(sub) < 3:
                    continue
                sub_members = set(sub)
                sub_inner = {u: [v for v in pruned[u] if v in sub_members] for u in sub}
                loops = _loops(sub_inner)
                if loops <= tangle_loops:
                    _search(x, sub_inner, out, result, skip_pairs=False)
                else:
                    result.tangles.append(Tangle(x, tuple(sorted(sub)), loops))

    result.rings.sort(key=lambda r: (r.members, r.amount))
    result.broken.sort(key=lambda r: (r.members, r.amount))
    result.tangles.sort(key=lambda t: (t.members[0], t.amount))
    return result


def _loops(inner: dict[int, list[int]]) -> int:
    return sum(len(vs) for vs in inner.values()) - len(inner) + 1


def _search(x: int, inner: dict[int, list[int]], out: Gifts, result: RingAnalysis, skip_pairs: bool) -> None:
    for cycle in simple_cycles(inner):
        if len(cycle) == 2 and skip_pairs:
            continue  # already a two-player ring
        breakers = rule6_breakers(cycle, out)
        if breakers:
            result.broken.append(BrokenRing(x, cycle, breakers))
        else:
            result.rings.append(Ring(x, cycle))


def rule6_breakers(cycle: tuple[int, ...], out: Gifts) -> tuple[tuple[int, int, int], ...]:
    """Gifts between members of ``cycle`` other than the cycle's own gifts."""
    members = set(cycle)
    k = len(cycle)
    found = []
    for i, u in enumerate(cycle):
        nxt = cycle[(i + 1) % k]
        for v, amount in out[u].items():
            if v != nxt and v in members:
                found.append((u, v, amount))
    return tuple(sorted(found))


def strongly_connected(succ: dict[int, list[int]]) -> list[list[int]]:
    """Tarjan's algorithm, iterative.  Nodes are the keys of ``succ``; edges to
    nodes that are not keys (they give nothing) are ignored."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    comps: list[list[int]] = []
    counter = 0
    push, pop = stack.append, stack.pop
    for root, successors in succ.items():
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        push(root)
        on_stack.add(root)
        work = [(root, iter(successors))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    if w not in succ:
                        continue
                    index[w] = low[w] = counter
                    counter += 1
                    push(w)
                    on_stack.add(w)
                    work.append((w, iter(succ[w])))
                    break
                if w in on_stack:
                    iw = index[w]
                    low[v] = min(low[v], iw)
            else:
                work.pop()
                lv = low[v]
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], lv)
                if lv == index[v]:
                    w = pop()
                    on_stack.discard(w)
                    if w == v:
                        comps.append([v])
                        continue
                    comp = [w]
                    while w != v:
                        w = pop()
                        on_stack.discard(w)
                        comp.append(w)
                    comps.append(comp)
    return comps


def simple_cycles(inner: dict[int, list[int]]) -> Iterator[tuple[int, ...]]:
    """Every simple cycle of a strongly connected graph, each once, rotated to
    start at its lowest node.

    Members that receive and give exactly one gift inside the graph are chained
    between the *branch* members (the others); the search runs over branch
    members only, following whole chains."""
    indeg = Counter(v for vs in inner.values() for v in vs)
    branch = sorted(u for u, vs in inner.items() if len(vs) != 1 or indeg[u] != 1)
    if not branch:  # one plain cycle
        start = min(inner)
        cycle = [start]
        v = inner[start][0]
        while v != start:
            cycle.append(v)
            v = inner[v][0]
        yield tuple(cycle)
        return
    is_branch = set(branch)
    chains: dict[int, list[tuple[int, list[int]]]] = {}
    for b in branch:
        ends = []
        for w in inner[b]:
            path = [b]
            while w not in is_branch:
                path.append(w)
                w = inner[w][0]
            ends.append((w, path))
        chains[b] = ends
    pos = {b: i for i, b in enumerate(branch)}

    for start in branch:
        yield from _cycles_from(start, chains, pos)


def _cycles_from(start: int, chains: dict[int, list[tuple[int, list[int]]]],
                 pos: dict[int, int]) -> Iterator[tuple[int, ...]]:
    """The cycles through ``start`` that visit only branch nodes after it in ``pos`` order."""
    first = pos[start]
    on_path = {start}
    pieces: list[list[int]] = []

    def extend(node: int) -> Iterator[tuple[int, ...]]:
        for end, path in chains[node]:
            if end == start:
                yield _rotate([m for piece in pieces for m in piece] + path)
            elif pos[end] > first and end not in on_path:
                on_path.add(end)
                pieces.append(path)
                yield from extend(end)
                pieces.pop()
                on_path.discard(end)

    yield from extend(start)


def _rotate(cycle: list[int]) -> tuple[int, ...]:
    i = cycle.index(min(cycle))
    return tuple(cycle[i:] + cycle[:i])

"""Trend charts for the game pages, as inline SVG: no script, no style
attribute (the pages' Content-Security-Policy allows neither), presentation
attributes only; each chart has a title and a description for screen readers,
and the page shows the same figures as a table beside it.

A chart shows the public scores of the game (``Rules.scores``) after each
processed turn, for the players leading after the last one.  Each player keeps
one colour in every chart and on the boards of a game: the colour of their
stable index (``Rules.colours``: join order, rmpm's player number), never of
their rank.  The scale spans the figures with a little room (never from zero
for its own sake), its ticks whole numbers inside the figures' range; a
chart of a single turn is no chart (the table beside it says it all).
"""

from __future__ import annotations

from html import escape

from pbm_server.base.printable import xml_chars

#: the players' colours: the same twelve as the boards' chips (templates/boards.css .c0 ... .c11, rmpm's
#: legend), each with WCAG AA contrast (>= 3:1 for graphics, 4.5:1 under white text) on white
PALETTE = ("#0b5cad", "#b3261e", "#1b6e34", "#6a3d9a", "#8a4b00", "#00707a",
           "#a3166b", "#3949ab", "#4a5360", "#6d5d00", "#c2185b", "#2e5e1e")
#: the most lines one chart draws (the leaders after the last turn)
MAX_LINES = 8
WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 48, 150, 16, 36


def leaders(series: dict[str, list[tuple[int, float]]]) -> list[str]:
    """The players with the highest last score, at most MAX_LINES."""
    last = {h: points[-1][1] for h, points in series.items() if points}
    return sorted(last, key=lambda h: (-last[h], h.lower()))[:MAX_LINES]


def _nice_step(span: float) -> int:
    """A whole step of 1, 2 or 5 times a power of ten giving three to five ticks over ``span``."""
    rough = max(span / 5, 1.0)
    power = 1
    while power * 10 <= rough:
        power *= 10
    return next(power * m for m in (1, 2, 5, 10) if power * m >= rough)


def scale(values: list[float]) -> tuple[float, float, list[int]]:
    """The lowest and highest figure the scale shows and its ticks: whole
    numbers inside the figures' range (the lowest and highest figure when no
    round step falls between them), the scale a little wider than the
    figures (5 % of their span, at least half a unit) so no line lies on the
    frame; never stretched to zero."""
    low, high = min(values), max(values)
    pad = max((high - low) * 0.05, 0.5)
    step = _nice_step(high - low)
    first = -(-int(low) // step) * step if low == int(low) else (int(low) // step + 1) * step
    ticks = list(range(first, int(high) + 1, step))
    if len(ticks) < 2:
        ticks = sorted({int(round(low)), int(round(high))})
    return low - pad, high + pad, ticks


def colour_map(handles: list[str], known: dict[str, int] | None = None) -> dict[str, int]:
    """Each handle's colour index: ``known`` (the game's stable indexes,
    ``Rules.colours``) where it has one, the next unused index for the rest
    (a player who has left), in the order given."""
    out = {h: i % len(PALETTE) for h, i in (known or {}).items()}
    used = set(out.values())
    free = [i for i in range(len(PALETTE)) if i not in used] or list(range(len(PALETTE)))
    for h in handles:
        if h not in out:
            out[h] = free[0]
            free = free[1:] or list(range(len(PALETTE)))
    return out


def line_chart(series: dict[str, list[tuple[int, float]]], turn_name: str, title: str, *,
               colours: dict[str, int] | None = None, ident: str = "chart") -> str:
    """An SVG line chart of ``series`` (handle -> [(turn, score)]); "" when
    there are fewer than two turns to show (a single point is a table row,
    not a chart).  ``colours``: each handle's colour index (:func:`colour_map`;
    by default the order of ``series``).  ``ident`` names the chart's title
    and description (one page may have several)."""
    shown = leaders(series)
    points = [p for h in shown for p in series[h]]
    turns = sorted({t for t, _ in points})
    if len(turns) < 2:
        return ""
    colours = colour_map(list(series), colours)
    low, high, ticks = scale([v for _, v in points])
    first, last = turns[0], turns[-1]
    span_x = max(1, last - first)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(turn: int) -> float:
        return LEFT + (turn - first) / span_x * plot_w

    def y(value: float) -> float:
        return TOP + plot_h - (value - low) / (high - low) * plot_h

    desc = "; ".join(f"{h}: " + ", ".join(f"{turn_name} {t} {v:g}" for t, v in series[h]) for h in shown)
    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="{ident}-title {ident}-desc" '
           f'xmlns="http://www.w3.org/2000/svg">',
           f'<title id="{ident}-title">{escape(title)}</title><desc id="{ident}-desc">{escape(desc)}</desc>',
           f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" stroke="#4a5360"/>',
           f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#4a5360"/>']
    for value in ticks:
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end" font-size="12" '
                   f'fill="#4a5360">{value}</text>')
    step = max(1, len(turns) // 10)
    for t in turns[::step]:
        out.append(f'<text x="{x(t):.1f}" y="{HEIGHT - 12}" text-anchor="middle" font-size="12" fill="#4a5360">{t}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 1}" text-anchor="middle" font-size="12" '
               f'fill="#4a5360">{escape(turn_name)}</text>')
    for i, handle in enumerate(shown):
        colour = PALETTE[colours[handle]]
        coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in series[handle])
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2.5"/>')
        for t, v in series[handle]:
            out.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"/>')
        ly = TOP + 14 + i * 18
        out.append(f'<rect x="{WIDTH - RIGHT + 12}" y="{ly - 9}" width="12" height="12" fill="{colour}"/>'
                   f'<text x="{WIDTH - RIGHT + 30}" y="{ly + 2}" font-size="13" fill="#1b1f24">{escape(handle)}</text>')
    out.append("</svg>")
    # a handle or a title may hold a character XML 1.0 allows nowhere: the SVG stays well-formed
    return xml_chars("".join(out))

"""Trend charts for the game pages, as inline SVG: no script, no style
attribute (the pages' Content-Security-Policy allows neither), presentation
attributes only; each chart has a title and a description for screen readers,
and the page shows the same figures as a table beside it.

A chart shows the public scores of the game (``Rules.scores``) after each
processed turn, for the players leading after the last one.
"""

from __future__ import annotations

from html import escape

from pbm_server.base.printable import xml_chars

#: colours that keep WCAG AA contrast (>= 3:1 for graphics) on white, and differ for the common colour blindnesses
PALETTE = ("#0b5cad", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0e7490", "#a16207", "#4d4d4d")
#: the most lines one chart draws (the leaders after the last turn)
MAX_LINES = len(PALETTE)
WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 48, 150, 16, 36


def leaders(series: dict[str, list[tuple[int, float]]]) -> list[str]:
    """The players with the highest last score, at most MAX_LINES."""
    last = {h: points[-1][1] for h, points in series.items() if points}
    return sorted(last, key=lambda h: (-last[h], h.lower()))[:MAX_LINES]


def _span(values: list[float], from_zero: bool) -> tuple[float, float]:
    """The lowest and highest figure the scale shows."""
    if from_zero:
        return min(0.0, min(values)), max(1.0, max(values))
    low, high = min(values), max(values)
    pad = max(10.0, (high - low) * 0.1)
    return float(int(low - pad)), float(int(high + pad + 1))


def line_chart(series: dict[str, list[tuple[int, float]]], turn_name: str, title: str, *,
               from_zero: bool = True, ident: str = "chart") -> str:
    """An SVG line chart of ``series`` (handle -> [(turn, score)]); "" when
    there is less than one turn to show.  ``from_zero``: the scale starts at
    0 (scores); else it spans the figures (ratings near 1500).  ``ident``
    names the chart's title and description (one page may have several)."""
    shown = leaders(series)
    points = [p for h in shown for p in series[h]]
    if not points:
        return ""
    turns = sorted({t for t, _ in points})
    low, high = _span([v for _, v in points], from_zero)
    first, last = turns[0], turns[-1]
    span_x = max(1, last - first)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(turn: int) -> float:
        return LEFT + (turn - first) / span_x * plot_w if last > first else LEFT + plot_w / 2

    def y(value: float) -> float:
        return TOP + plot_h - (value - low) / (high - low) * plot_h

    desc = "; ".join(f"{h}: " + ", ".join(f"{turn_name} {t} {v:g}" for t, v in series[h]) for h in shown)
    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="{ident}-title {ident}-desc" '
           f'xmlns="http://www.w3.org/2000/svg">',
           f'<title id="{ident}-title">{escape(title)}</title><desc id="{ident}-desc">{escape(desc)}</desc>',
           f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" stroke="#4a5360"/>',
           f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#4a5360"/>']
    for value in (low, (low + high) / 2, high):
        out.append(f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end" font-size="12" fill="#4a5360">'
                   f'{value:g}</text>')
    step = max(1, len(turns) // 10)
    for t in turns[::step]:
        out.append(f'<text x="{x(t):.1f}" y="{HEIGHT - 12}" text-anchor="middle" font-size="12" fill="#4a5360">{t}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 1}" text-anchor="middle" font-size="12" '
               f'fill="#4a5360">{escape(turn_name)}</text>')
    for i, handle in enumerate(shown):
        colour = PALETTE[i]
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

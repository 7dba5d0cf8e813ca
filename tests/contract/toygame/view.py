"""What a Tally player sees: every tally, and only their own secret."""

from __future__ import annotations

from games.base import Section, State


def sections(state: State, viewer: str | None) -> list[Section]:
    rows = [f"{h}: {n}" for h, n in sorted(state["tally"].items())] or ["(nobody yet)"]
    out = [Section(title=f"Tally, round {state['round']}", text="\n".join(rows))]
    if viewer in state["secrets"]:
        out.append(Section(title="Your secret", text=state["secrets"][viewer]))
    return out

"""Every turn-based kind takes ``vote`` and ``ready`` at its address as the
server's commands for that game (route.py), whatever else the mail holds."""

from __future__ import annotations

import pytest

from games import get_rules
from games.base import Line
from pbm_server.pipeline.route import Routed, ToGame, _server_lines_at_game
from pbm_server.play.votes import needed

pytestmark = pytest.mark.nodb


@pytest.mark.parametrize("kind", ["rmpm", "giveaway", "agora_rpg", "sequence", "curio"])
def test_vote_and_ready_at_a_game_address_go_to_the_server_with_the_game_name(kind):
    lines = [Line(1, "vote extend 24h"), Line(2, "Vote yes"), Line(3, "ready"), Line(4, "vote g7 no")]
    routed = Routed(ToGame("g7"), game_lines=lines, game_kind=kind, press_game="g7")
    routed.commands = get_rules(kind).parse(lines)
    _server_lines_at_game(routed)
    assert [ln.text for ln in routed.server_lines] == ["vote g7 extend 24h", "vote g7 yes", "ready g7", "vote g7 no"]
    assert routed.commands == [] and routed.misdirected == []


def test_the_quorum_of_each_rule():
    assert [needed("two-thirds", n) for n in (1, 2, 3, 4, 5, 6)] == [1, 2, 2, 3, 4, 4]
    assert [needed("majority", n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]
    assert [needed("unanimous", n) for n in (1, 3, 7)] == [1, 3, 7]

"""The game contract (games/base.py), checked for every game the same way.

Parametrized over every kind in ``games.KINDS`` (a game whose package fails
to import fails here; nothing is skipped) plus the test-only toy game.  Each
game's fixture scenario is ``SCENARIO`` in its own ``scenario.py``
(games/scenario.py says what it is).
"""

from __future__ import annotations

import copy
import functools
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import games
from games.base import ALL_PLAYERS, Command, GameError, Outcome, Rules, Section
from games.scenario import Probe
from tests.contract.games import CONTRACT_KINDS, TEST_ONLY, MissingScenario, play, rules_of, scenario_of
from tests.games.driver import Table, check_commands, lines, password, render_all, section_texts

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GAMES_DIR = Path(games.__file__).resolve().parent
SHAPE = ("__init__.py", "rules.py", "parse.py", "state.py", "view.py", "help.py", "scenario.py")


@functools.cache
def played(kind: str) -> tuple[Table, Probe]:
    """The scenario of ``kind``, played once (tests only read it)."""
    return play(kind)


def fill(text: str) -> str:
    """Replace {pw:handle} placeholders of sample lines with the password."""
    while "{pw:" in text:
        start = text.index("{pw:")
        end = text.index("}", start)
        text = text[:start] + password(text[start + 4 : end]) + text[end + 1 :]
    return text


# -- the registry -------------------------------------------------------------------------------
def test_every_registered_game_has_a_scenario() -> None:
    missing = []
    for kind in games.KINDS:
        try:
            scenario_of(kind)
        except MissingScenario as exc:
            missing.append(str(exc))
    assert not missing, "\n".join(missing)
    assert not set(TEST_ONLY) & set(games.KINDS), "a test-only game leaked into the server's list"


def test_a_game_without_a_scenario_is_told_which_file_to_write(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(games.KINDS, "bare", "tests.contract")  # a package with no scenario.py
    with pytest.raises(MissingScenario, match="bare has no scenario: write tests/contract/scenario.py with SCENARIO"):
        scenario_of("bare")


@pytest.mark.parametrize("kind", list(games.KINDS))
def test_package_has_the_common_shape(kind: str) -> None:
    folder = GAMES_DIR / kind
    missing = [name for name in SHAPE if not (folder / name).is_file()]
    assert not missing, f"games/{kind} lacks {missing}"
    assert len((folder / "__init__.py").read_text().splitlines()) <= 15, "__init__.py only exposes RULES"
    rules = games.get_rules(kind)
    assert isinstance(rules, Rules) and rules.kind == kind
    assert type(rules).__module__ == f"games.{kind}.rules"


@pytest.mark.parametrize("kind", CONTRACT_KINDS)
def test_scenario_plays(kind: str) -> None:
    table, probe = played(kind)
    assert table.outcomes and scenario_of(kind).samples and probe.refusals
    rules = table.rules
    for state in table.history:
        assert isinstance(rules.players(state), list)
        waiting = rules.waiting_for(state)
        assert set(waiting) <= set(rules.players(state))


# -- parse --------------------------------------------------------------------------------------
line_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), min_size=1,
                    max_size=100).map(str.strip).filter(bool)


def check_parsed(kind: str, texts: list[str]) -> list[Command]:
    given_lines = lines(*texts)
    rules = rules_of(kind)
    commands = rules.parse(given_lines)
    check_commands(rules, given_lines, commands)
    for cmd in commands:
        assert isinstance(cmd, Command) and isinstance(cmd.name, str)
        json.dumps(cmd.args)  # JSON-compatible
    return commands


@pytest.mark.parametrize("kind", CONTRACT_KINDS)
@FUZZ
@given(texts=st.lists(line_text, min_size=1, max_size=6))
def test_parse_never_raises_on_arbitrary_lines(kind: str, texts: list[str]) -> None:
    check_parsed(kind, texts)


def mutated(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randrange(4)):
        i = rng.randrange(len(chars) + 1)
        op = rng.randrange(4)
        if op == 0 and chars:
            del chars[min(i, len(chars) - 1)]
        elif op == 1:
            chars.insert(i, rng.choice(" -:#0123456789xyzXYZ\t"))
        elif op == 2 and chars:
            chars[min(i, len(chars) - 1)] = chars[min(i, len(chars) - 1)].swapcase()
        else:
            chars[i:i] = rng.choice(["  ", "->", "99", "-1", "0", "TO", "\u00e4"])
    return "".join(chars).strip() or text


@pytest.mark.parametrize("kind", CONTRACT_KINDS)
@FUZZ
@given(data=st.data())
def test_parse_never_raises_on_mutated_commands(kind: str, data: st.DataObject) -> None:
    rng = data.draw(st.randoms(use_true_random=False))
    picks = data.draw(st.lists(st.sampled_from(scenario_of(kind).samples), min_size=1, max_size=5))
    check_parsed(kind, [mutated(rng, fill(p)) for p in picks])


# -- apply: refusals change nothing --------------------------------------------------------------
@pytest.mark.parametrize("kind", CONTRACT_KINDS)
def test_refused_commands_leave_the_state_unchanged(kind: str) -> None:
    table, probe = played(kind)
    state = probe.at
    for refusal in probe.refusals:
        out = apply_at(table, state, refusal.sender, list(refusal.lines), authenticated=refusal.authenticated,
                       gm=refusal.gm)
        accepted = [(r.text, r.message) for r in out.results if r.ok]
        assert not accepted, f"{kind}: {refusal} was accepted: {accepted}"
        assert all(r.message.strip() for r in out.results)
        assert out.state == state, f"{kind}: the refused mail {refusal.lines} changed the state"
        assert not (out.joined or out.left or out.turn_done or out.finished)


@pytest.mark.parametrize("kind", CONTRACT_KINDS)
@FUZZ
@given(data=st.data())
def test_refused_fuzzed_mail_leaves_the_state_unchanged(kind: str, data: st.DataObject) -> None:
    table, _ = played(kind)
    state = data.draw(st.sampled_from(table.history))
    senders = [*table.rules.players(state), "zed", None]
    sender = data.draw(st.sampled_from(senders))
    rng = data.draw(st.randoms(use_true_random=False))
    picks = data.draw(st.lists(st.sampled_from(scenario_of(kind).samples), min_size=1, max_size=3))
    texts = [mutated(rng, fill(p)) if data.draw(st.booleans()) else fill(p) for p in picks]
    out = apply_at(table, state, sender, texts)
    if not any(r.ok for r in out.results):
        assert out.state == state, f"{kind}: {texts} from {sender} was refused but changed the state"


def apply_at(table: Table, state: Any, sender: str | None, texts: list[str], **kw: Any) -> Outcome:
    """Apply a mail at ``state`` (the table itself is left as it is)."""
    saved = table.state
    table.state = copy.deepcopy(state)
    try:
        return table.apply(sender, *texts, rng=random.Random(5), **kw)
    finally:
        table.state = saved


# -- state documents ------------------------------------------------------------------------------
def floats_in(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(not isinstance(k, str) or floats_in(v) for k, v in value.items())
    if isinstance(value, list):
        return any(floats_in(v) for v in value)
    return False


@pytest.mark.parametrize("kind", CONTRACT_KINDS)
def test_export_import_round_trip(kind: str) -> None:
    table, _ = played(kind)
    rules = table.rules
    for state in table.history:
        assert not floats_in(state), "a state is JSON with str keys and no floats"
        exported = json.loads(json.dumps(rules.export_state(copy.deepcopy(state))))
        imported = rules.import_state(copy.deepcopy(exported))
        assert json.loads(json.dumps(imported)) == imported
        assert rules.export_state(imported) == exported
        assert rules.view(imported, None) == rules.view(state, None)


@pytest.mark.parametrize("kind", CONTRACT_KINDS)
def test_import_refuses_what_is_not_a_state(kind: str) -> None:
    table, _ = played(kind)
    garbled = {key: "?" for key in table.rules.export_state(table.state)}
    with pytest.raises(GameError):
        table.rules.import_state(garbled)


# -- determinism --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", CONTRACT_KINDS)
def test_same_seed_same_game(kind: str) -> None:
    first, _ = play(kind, seed=11)
    again, _ = play(kind, seed=11)
    assert again.history == first.history
    assert again.outcomes == first.outcomes


@pytest.mark.parametrize("kind", CONTRACT_KINDS)
def test_run_turn_is_deterministic_for_a_seed(kind: str) -> None:
    table, _ = played(kind)
    rules = table.rules
    ran = 0
    for state in table.history:
        outcomes = []
        for _ in range(2):
            ctx = table.ctx(None, rng=random.Random(42))
            try:
                outcomes.append(rules.run_turn(copy.deepcopy(state), ctx))
            except GameError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1]
        ran += isinstance(outcomes[0], Outcome)
    assert ran or not rules.has_turns, f"{kind} has turns but none could be run"


# -- what each viewer sees -------------------------------------------------------------------------
def viewers(rules: Rules[Any], state: Any) -> list[str | None]:
    return [*rules.players(state), "outsider", None]


def shown(kind: str, sections: list[Section]) -> str:
    return "\n".join(text for s in sections for text in section_texts(kind, s))


@pytest.mark.parametrize("kind", CONTRACT_KINDS)
def test_view_never_shows_what_is_hidden_from_the_viewer(kind: str) -> None:
    table, probe = played(kind)
    rules = table.rules
    hidden_somewhere = False
    for state in table.history:
        for viewer in viewers(rules, state):
            hidden = rules.hidden_from(state, viewer)
            assert all(isinstance(h, str) and h for h in hidden)
            hidden_somewhere |= bool(hidden)
            text = shown(kind, rules.view(state, viewer))
            leaked = [h for h in hidden if h in text]
            assert not leaked, f"{kind}: the view of {viewer} shows {leaked}"
    assert hidden_somewhere == probe.hides


@pytest.mark.parametrize("kind", CONTRACT_KINDS)
def test_mails_never_show_what_is_hidden_from_their_reader(kind: str) -> None:
    table, _ = played(kind)
    rules = table.rules
    for sender, out in table.outcomes:
        if sender is not None:
            text = shown(kind, out.sections) + "\n".join(r.message for r in out.results)
            leaked = [h for h in rules.hidden_from(out.state, sender) if h in text]
            assert not leaked, f"{kind}: the reply to {sender} shows {leaked}"
        for notice in out.notices:
            readers = rules.players(out.state) if notice.to == [ALL_PLAYERS] else notice.to
            for reader in readers:
                text = notice.subject + "\n" + notice_text(kind, notice, reader)
                leaked = [h for h in rules.hidden_from(out.state, reader) if h in text]
                assert not leaked, f"{kind}: a notice to {reader} shows {leaked}"


def notice_text(kind: str, notice: Any, reader: str) -> str:
    if not notice.template:
        return str(notice.text)
    data = dict(notice.data)
    data.setdefault("viewer", reader)  # as pbm_server.play.notices does
    return "\n".join(render_all(kind, notice.template, data))


# -- templates ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", CONTRACT_KINDS)
def test_every_template_renders_with_the_servers_environment(kind: str) -> None:
    table, _ = played(kind)
    rules = table.rules
    rendered = 0
    for state in table.history:
        for viewer in viewers(rules, state):
            for section in rules.view(state, viewer):
                assert section.template or section.text, "a section with neither text nor template"
                rendered += len(section_texts(kind, section))
    for _, out in table.outcomes:
        for section in out.sections:
            rendered += len(section_texts(kind, section))
        for notice in out.notices:
            assert notice.subject and (notice.template or notice.text)
            assert notice.kind in ("report", "notice")
            readers = [*rules.players(out.state)][:1] or ["somebody"]
            rendered += len(notice_text(kind, notice, readers[0]))
    assert rendered
    assert rules.help_text().strip()

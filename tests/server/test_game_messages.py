"""What the games say when a line is wrong, over SMTP (issue 17.5): the
reply names the word at fault and what would be accepted."""


def test_giveaway_names_the_bad_word_of_a_give_line(pbm):
    ann = pbm.register("ann", "ann-secret-1")
    pbm.register("bob", "bob-secret-1")
    pbm.new_game("giveaway", "ring")
    pbm.mail(ann, "ring", "JOIN\n$$ann-secret-1$$")
    text = pbm.flat(pbm.mail(ann, "ring", "GIVE 3 TOO bob\nGIVE 3 TO bob .\n$$ann-secret-1$$"))
    assert "'TOO' where TO belongs" in text, text
    assert "'.' after the handle" in text, text
    assert "expected GIVE <n> TO <handle>" in text
    assert pbm.sql("SELECT count(*) FROM orders")[0][0] == 0


def test_rmpm_arrows_and_a_refused_mails_valid_line(pbm):
    ann = pbm.register("ann", "ann-secret-1")
    ben = pbm.register("ben", "ben-secret-1")
    pbm.new_game("rmpm", "town")
    pbm.mail(ann, "town", "JOIN an 01-05 25-10 Ann's Arcade\n$$ann-secret-1$$")
    pbm.mail(ben, "town", "JOIN bn 05-01 10-25 Ben's Bazaar\n$$ben-secret-1$$")
    pbm.run_turn("town")
    # a broken arrow: its own line says how to write it, the good line is not blamed
    text = pbm.flat(pbm.mail(ann, "town", "01-05 - > 02-05\n25-10 -> 24-10\n$$ann-secret-1$$"))
    assert "write the arrow as ->" in text, text
    assert "valid, but not taken: line 1 of this mail was refused" in text, text
    assert "a move needs two lines" not in text
    # the arrow of phones and word processors is read as ->
    text = pbm.flat(pbm.mail(ann, "town", "01-05 \u2192 02-05\n25-10 -> 24-10\n$$ann-secret-1$$"))
    assert "REFUSED" not in text and "01-05 -> 02-05" in text, text


def test_curio_takes_pbmserv_forms_of_draw_and_resign(pbm):
    alice, bob = pbm.register("alice", "alice-pass-1"), pbm.register("bob", "bob-pass-22")
    pbm.mail(alice, "pbm", "curio challenge alice bob $$alice-pass-1$$")
    offer = pbm.flat(pbm.mail(alice, "pbm", "curio move 101 alice alice-pass-1 propose"))
    assert "REFUSED" not in offer and "curio move 101 alice **** propose" in offer, offer
    agreed = pbm.flat(pbm.mail(bob, "pbm", "curio move 101 bob bob-pass-22 accept"))
    assert "REFUSED" not in agreed and "draw" in agreed.lower(), agreed
    pbm.mail(alice, "pbm", "curio challenge alice bob $$alice-pass-1$$")
    gone = pbm.flat(pbm.mail(bob, "pbm", "curio move 102 bob bob-pass-22 resign"))
    assert "REFUSED" not in gone and "resign" in gone.lower(), gone
    assert "alice-pass-1" not in offer and "bob-pass-22" not in agreed + gone


def test_curio_import_refuses_impossible_positions(pbm):
    """`pbm game import` names what cannot be: faces beyond the base, an
    11th piece (issue 17.5)."""
    import json

    alice = pbm.register("alice", "alice-pass-1")
    pbm.register("bob", "bob-pass-22")
    pbm.mail(alice, "pbm", "curio challenge alice bob $$alice-pass-1$$")
    doc = json.loads(pbm.cli("game", "export", "curio").stdout)
    board = doc["state"]["boards"]["101"]

    def attempt(change) -> str:
        bad = json.loads(json.dumps(doc))
        b = bad["state"]["boards"]["101"]
        start = json.loads(json.dumps(board["position"]))
        change(start["pieces"])
        b["start"], b["position"], b["moves"] = start, start, []
        path = pbm.tmp / "bad.json"
        path.write_text(json.dumps(bad))
        proc = pbm.cli("game", "import", "curio", "copy", str(path), check=False)
        assert proc.returncode != 0, proc.stdout
        return proc.stderr

    def faces(pieces):
        square = next(sq for sq, p in pieces.items() if p["side"] == "light")
        pieces[square].update(own=9, other=7)

    assert "has a face 9: with -base=4 faces run 1 to 4" in attempt(faces)

    def eleventh(pieces):
        free = next(f"{c}{r}" for c in "abcde" for r in "12345" if f"{c}{r}" not in pieces)
        pieces[free] = {"side": "light", "own": 1, "other": 1, "revealed": False}

    err = attempt(eleventh)
    assert "1/1 pieces than the setup gives a side" in err or "11 pieces" in err, err
    assert [r[0] for r in pbm.sql("SELECT name FROM games")] == ["curio"]

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

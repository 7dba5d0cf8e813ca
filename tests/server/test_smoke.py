def test_register_and_help(pbm):
    email = pbm.register("alice", "wonderland1")
    reply = pbm.mail(email, "pbm", "help")
    assert "register HANDLE PASSWORD" in pbm.text(reply)

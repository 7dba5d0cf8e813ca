"""Mail in and out: the SMTP listener and `pbm mail inject` (inbound), reading a stored mail (mailtext, replies,
headers, senderauth), composing every mail the server sends (compose, subjects), the outbox and its delivery
(outbound), and what bounces back (bounces).

Imports only base and store.
"""

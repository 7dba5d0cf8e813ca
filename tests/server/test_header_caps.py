"""The caps on a header's value before the email package parses it
(mail/headers.py, over_cap): every header the package reads as addresses
is capped at MAX_ADDRESSES addresses, not only To, Cc, Bcc, From, Sender
and Reply-To.  (A second, shorter list of address headers further down the
module once replaced the first, so a Resent-To of 10,000 addresses reached
the parser whole.)"""

from __future__ import annotations

from email.headerregistry import AddressHeader, HeaderRegistry

import pytest

from pbm_server.mail.headers import MAX_ADDRESSES, bounded, over_cap

pytestmark = pytest.mark.nodb

ADDRESS_HEADERS = sorted(name for name, kind in HeaderRegistry().registry.items() if issubclass(kind, AddressHeader))


def test_the_package_reads_resent_headers_as_addresses():
    assert {"to", "from", "resent-to", "resent-cc", "resent-from"} <= set(ADDRESS_HEADERS)


@pytest.mark.parametrize("name", ADDRESS_HEADERS)
def test_every_address_header_is_capped_at_its_addresses(name):
    many = ", ".join(f"a{i}@example.org" for i in range(MAX_ADDRESSES + 1))
    assert over_cap(name, many) == f"it has {MAX_ADDRESSES + 1:,} addresses (@); at most {MAX_ADDRESSES} are read"
    assert bounded(name, many).count("@") == MAX_ADDRESSES
    assert over_cap(name, ", ".join(f"a{i}@example.org" for i in range(MAX_ADDRESSES))) is None

"""Accounts: the account service (service), password hashes (passwords), the password-guessing gate
(throttle), and one-time codes that prove an address (confirm).

Imports only base and store.
"""

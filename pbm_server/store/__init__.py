"""The database: engines and transactions (db), the tables (models), and finding rows (lookup).

Imports nothing of pbm_server but its own modules.
"""

"""The one error of the server's operations: a request that cannot be done."""


class DeskError(Exception):
    """A GM/CLI request that cannot be done; the message says why."""

"""The one exception type a user sees as a single line.

Everything that is the user's mistake or a missing piece of the environment
raises ShoalError with a message that says what is wrong and what to do.
The CLI prints it on one line and exits non-zero; `--debug` shows the
traceback.
"""


class ShoalError(Exception):
    """A problem the user can fix; str() is the whole message."""

    exit_code = 2


class Interrupted(ShoalError):
    """The user pressed Ctrl-C; what was finished is already on disk."""

    exit_code = 130

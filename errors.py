"""
Clean errors for user mistakes, shared by the scripts (train_image.py, train_video.py, sample.py).

A wrong flag, a missing file or an unreadable dataset raises `UserError` with one sentence that names the flag or
file and says what to do; `run_cli` turns it into one `error: ...` line and exit code 2, never a traceback.
"""
import sys


class UserError(ValueError):
    """A user-facing problem with settings or data; the message is one sentence saying what to do."""


def die(msg):
    """Print one clear line and exit non-zero (no traceback): for user mistakes."""
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def run_cli(main, args):
    """Run main(args), turning user errors (UserError, missing files) into one line and exit code 2."""
    try:
        main(args)
    except (UserError, FileNotFoundError) as e:
        die(str(e))
    except KeyboardInterrupt:
        die("interrupted")

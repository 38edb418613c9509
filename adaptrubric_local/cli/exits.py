"""The exit statuses of the `adaptrubric` commands, in one table: what each number means and which
commands give it, as the code does (the docs' table is checked against `EXIT_STATUSES` by a test),
and `GateConfig`, the option that turns error lines of a verdict file into a failing status for a
pipeline that gates on it. Knows nothing about how a command does its work.
"""
from __future__ import annotations

from dataclasses import dataclass, field

OK = 0
CHECK_FAILED = 1  # the command ran, and what it made or found fails a check it states
USAGE = 2  # bad usage or bad input, answered by one error line before any work is done
ERROR_LINES = 3  # score --fail-on-error: the verdict file holds error lines (every other line and the summary written)
SIGINT_STATUS, SIGTERM_STATUS = 130, 143  # 128 + the signal's number, as a shell reports it (stopping.py)

# status -> (what it means, when each command gives it); the order of the docs' table
EXIT_STATUSES: dict[int, tuple[str, str]] = {
    OK: ("done", "every command, when it did its work; `score` too when some lines are `error` or `unparsed` "
                 "(counted in the summary) unless `--fail-on-error`"),
    CHECK_FAILED: ("done, but the result fails the command's check",
                   "`route --input` with bad records; `bank validate` on an invalid bank; `bank refine` not done; "
                   "`calibrate --require-signal` without a signal; `distill collect` with failed trajectories; "
                   "`distill plan` (and `train --dry-run`) over the memory budget or `--max-seq-len`; `demo` "
                   "below 0.9 agreement; any command whose output was closed early (a broken pipe); an "
                   "unexpected error (a Python traceback)"),
    USAGE: ("bad usage or bad input",
            "an unknown flag, a missing argument, an option the engine does not read, an unreadable or invalid "
            "file, a model that is not there, a `distill train` its memory plan refuses: one `error:` line, before "
            "any work is done"),
    ERROR_LINES: ("error lines", "`score --fail-on-error` when the verdict file holds `error` lines (bad records, "
                                 "failed calls); the verdicts and the summary are written as without it"),
    SIGINT_STATUS: ("stopped by Ctrl-C (SIGINT)", "every command; what was done is kept (`score --resume` continues)"),
    SIGTERM_STATUS: ("stopped by SIGTERM", "every command, as for Ctrl-C; `serve` shuts down gracefully and exits 0"),
}


@dataclass
class GateConfig:
    """How `score`'s exit status reads its verdict file, for a pipeline that gates on it."""

    fail_on_error: bool = field(default=False, metadata={
        "help": f"exit {ERROR_LINES} when the verdict file holds error lines (bad records, failed calls), after "
                "writing every verdict and the summary; without it error lines are counted in the summary and "
                "the exit status is 0. Unparsed verdicts never fail the command: they are the model's answers"})

    def status(self, summary: dict) -> int:
        """The exit status of a `score` run whose summary is `summary` (its `errors`: the file's)."""
        return ERROR_LINES if self.fail_on_error and summary.get("errors") else OK

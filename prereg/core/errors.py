"""The error classes every package raises; the CLI maps them to exit codes.

They live in the top package (a leaf module) so that every subpackage can raise
them without importing another subpackage, keeping dependencies one-way.
"""

from __future__ import annotations


class PreregError(Exception):
    """Base class: a message for a person and the exit code the CLI returns."""

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        field: str | None = None,
        details: list[str] | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.field = field
        self.details = list(details or [])
        super().__init__(self.render())

    def render(self) -> str:
        where = ""
        if self.file and self.field:
            where = f"{self.file}: {self.field}: "
        elif self.file:
            where = f"{self.file}: "
        elif self.field:
            where = f"{self.field}: "
        text = where + self.message
        if self.details:
            text += "\n" + "\n".join(f"  - {d}" for d in self.details)
        return text

    def to_json(self) -> dict[str, object]:
        return {
            "error": type(self).__name__,
            "exit_code": self.exit_code,
            "message": self.message,
            "file": self.file,
            "field": self.field,
            "details": self.details,
        }


class WriteFailure(PreregError):
    """The machine refused a write (disk full, read-only folder): exit 1.

    Raised after the partial file is removed, so nothing half-written is left.
    """

    exit_code = 1


class BadInput(PreregError):
    """Bad input or usage (exit 2). Raised before anything is written."""

    exit_code = 2


class IntegrityError(PreregError):
    """Tampered registry, digest mismatch, mixed runs (exit 3)."""

    exit_code = 3


class ProtocolRefusal(PreregError):
    """Refused by the protocol: locked split spent, not runnable, incomplete (exit 4)."""

    exit_code = 4

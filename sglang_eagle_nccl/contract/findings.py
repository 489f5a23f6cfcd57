"""Problems found in user input: one shape for every error and warning the plugin reports.

Errors are part of the interface: each finding names the variable, the value, the rule that
was broken and the fix, so one line tells an operator everything.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.terminal import printable

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One validation result about one variable (or one input element)."""

    severity: Severity
    variable: str
    value: str | None
    rule: str
    fix: str
    source: str | None = None

    def message(self) -> str:
        """One human-readable line: where, what, why, how to fix."""
        where = f"[{self.source}] " if self.source else ""
        shown = f"{self.variable}={shown_value(self.value)}" if self.value is not None else self.variable
        # One line, whatever a name or a source holds (the values are repr'd already).
        return printable(f"{where}{shown}: {self.rule}. Fix: {self.fix}")

    def with_source(self, source: str | None) -> Finding:
        if source is None or self.source is not None:
            return self
        return Finding(self.severity, self.variable, self.value, self.rule, self.fix, source)

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)


# Values longer than this are shown cut (a 5000-digit number or a 128 KiB value would bury the
# rule and the fix); to_dict() keeps the whole value.
SHOWN_VALUE_MAX = 120


def shown_value(value: str) -> str:
    """``repr(value)``, cut to its start with the length when it is long."""
    if len(value) <= SHOWN_VALUE_MAX:
        return repr(value)
    return f"{value[:48]!r}... ({len(value)} characters)"


def error(variable: str, value: str | None, rule: str, fix: str) -> Finding:
    return Finding("error", variable, value, rule, fix)


def warning(variable: str, value: str | None, rule: str, fix: str) -> Finding:
    return Finding("warning", variable, value, rule, fix)


class ProfileError(PluginStop):
    """Raised when input cannot become a profile. Carries every error found, not just the first."""

    def __init__(self, findings: Iterable[Finding]):
        self.findings: tuple[Finding, ...] = tuple(findings)
        super().__init__(self.text("nothing was applied"))

    def text(self, consequence: str | None = None) -> str:
        """Every error, one per line, under a header that says what followed (``consequence``):
        where the profile was to be applied, "nothing was applied"; ``validate``, which never
        applies anything, says nothing of the kind."""
        errors = self.errors
        lines = [f"{len(errors)} problem(s) in the NCCL profile" + (f"; {consequence}:" if consequence else ":")]
        lines += [f"  - {f.message()}" for f in errors]
        return "\n".join(lines)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

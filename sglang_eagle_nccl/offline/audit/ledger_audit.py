"""``audit --ledger``: read the launch's ledger, join it with the tuner's answers, render it."""

from __future__ import annotations

from typing import Any

from sglang_eagle_nccl.offline.audit.ledger_join import LedgerView, native_decider, summarize
from sglang_eagle_nccl.offline.audit.ledger_read import read_ledger
from sglang_eagle_nccl.offline.audit.ledger_render import comm_notes, format_ledger
from sglang_eagle_nccl.offline.audit.tuner_answers import read_tuner_answers


def ledger_view(run_dirs: list[str]) -> LedgerView | None:
    """The launch's ledger view, or None when no process of it wrote a ledger and the tuner recorded no answer."""
    ledger = read_ledger(run_dirs)
    answers = read_tuner_answers(run_dirs)
    if not ledger.files and not answers.processes:
        return None
    rules = ledger.profile.get("tuner_rules") if isinstance(ledger.profile.get("tuner_rules"), list) else []
    decide, note = native_decider(rules)
    view = summarize(ledger, decide, answers)
    view.decision_note = note
    return view


def ledger_screen(report: Any) -> tuple[dict[str, Any] | None, str]:
    """(the JSON section, the text) of the launch ``report`` judged."""
    view = ledger_view(list(report.run_dirs or [report.run_dir]))
    if view is None:
        return None, ("Phase ledger: no ledger file in the launch directory (start the launch with --nccl-ledger, "
                      "SGLANG_EAGLE_NCCL_LEDGER=1 or policy ledger = true)")
    return view.to_dict(), format_ledger(view, comm_notes(report))

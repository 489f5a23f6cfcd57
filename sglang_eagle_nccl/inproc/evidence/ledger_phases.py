"""Which speculative phase a forward pass is, from SGLang's own forward mode and the runner that runs it.

Rule: the phase is a function of the forward mode's *name* (``ForwardBatch.forward_mode.name``) and
of whether the model runner is a draft runner (``ModelRunner.is_draft_worker``), nothing else:

- ``DRAFT_EXTEND`` (SGLang <= 0.5.x before the v2 worker) and ``DRAFT_EXTEND_V2`` (0.5.23) are
  the draft extend;
- an extend-like mode (``EXTEND``, ``SPLIT_PREFILL``, ``PREBUILT``, ``DLLM_EXTEND``) is the draft
  extend on a draft runner, else the extend (prefill);
- ``DECODE`` is the draft decode on a draft runner, else the decode;
- any other name is shown as it is (lower case, ``_`` as spaces), whoever runs it:
  ``TARGET_VERIFY`` is the target verify, ``MIXED`` (chunked prefill with decode requests in one
  batch) is mixed, ``IDLE`` is idle (a data-parallel rank with nothing to run still joins the
  collectives), and a release that adds a mode gets a phase of its own on the screen, never a
  guess among the known ones.

Each release names its modes in ``srt/model_executor/forward_batch_info.py`` (``class
ForwardMode``); the names above cover 0.4.3 -> 0.5.23 (``tests/matrix`` reads them from the wheels).
The EAGLE draft worker's multi-step draft (``draft_forward``) runs the draft model without
``ModelRunner.forward``; its hook names the phase directly (:data:`DRAFT_DECODE`).
"""

from sglang_eagle_nccl.contract.ledger import OUTSIDE

DRAFT_DECODE = "draft decode"
_EXTEND_LIKE = frozenset({"EXTEND", "SPLIT_PREFILL", "PREBUILT", "DLLM_EXTEND"})
_DRAFT_EXTEND = frozenset({"DRAFT_EXTEND", "DRAFT_EXTEND_V2"})


def phase_of(mode_name: "str | None", is_draft: bool) -> str:
    """The phase of a forward in mode ``mode_name`` run by a draft runner (``is_draft``) or not."""
    if not mode_name:
        return OUTSIDE
    if mode_name in _DRAFT_EXTEND:
        return "draft extend"
    if mode_name in _EXTEND_LIKE:
        return "draft extend" if is_draft else "extend"
    if mode_name == "DECODE":
        return DRAFT_DECODE if is_draft else "decode"
    # TARGET_VERIFY, MIXED, IDLE and any mode a release adds: its own name (the first three are the
    # screen's "target verify", "mixed" and "idle").
    return mode_name.lower().replace("_", " ")

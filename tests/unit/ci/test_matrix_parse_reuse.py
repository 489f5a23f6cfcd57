"""ci/matrix: the hook check reuses the call graph's parse of the hook's module (parsing is most of the
matrix's time). The rule: the check's answer is exactly what checking the text it read gives, whether
or not a parse is reused -- the reused tree counts only when the graph parsed that very text.

Checked over generated module sources (target present, renamed, other parameters, a syntax error, a
package __init__, absent) and a graph that read the same or different sources, against the check that
parses the text itself (the reference: patchsets' own check without reuse).
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.knowledge.sglang import callgraph, patchsets

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "ci"))
try:
    import matrix
finally:
    sys.path.pop(0)

MODULE = "sglang.srt.mod"
_VARIANTS = {
    "present": "class Engine:\n    def start(self, server_args, port=0):\n        return 1\n",
    "renamed": "class Engine:\n    def _start_renamed(self, server_args):\n        return 1\n",
    "other_params": "class Engine:\n    def start(self, args):\n        return 1\n",
    "broken": "class Engine:\n    def start(self, server_args:\n",
    "function": "def start(server_args):\n    return 2\n",
    "absent": None,
}


def _reader(variant: str, as_package: bool):
    text = _VARIANTS[variant]
    files = {} if text is None else {("sglang/srt/mod/__init__.py" if as_package else "sglang/srt/mod.py"): text}
    return files.get


def _hook(qualname: str) -> patchsets.Hook:
    return patchsets.Hook(target=f"{MODULE}:{qualname}", kind="around", handler="h", required=True,
                          params=("server_args",))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(_VARIANTS)), st.sampled_from(sorted(_VARIANTS)), st.booleans(), st.booleans(),
       st.sampled_from(["Engine.start", "start"]))
def test_the_check_answers_for_the_text_it_read(checked: str, graphed: str, pkg_a: bool, pkg_b: bool,
                                                qualname: str) -> None:
    read = _reader(checked, pkg_a)
    tree = callgraph.SourceTree(_reader(graphed, pkg_b))  # the graph may have read other sources
    hook = _hook(qualname)
    reused = patchsets.check_hook_with_reader(read, hook, parse=matrix.parsed_by(tree, hook.module))
    assert reused == patchsets.check_hook_with_reader(read, hook)

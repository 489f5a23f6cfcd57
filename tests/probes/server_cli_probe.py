"""Run SGLang's real server CLI (``python -m sglang.launch_server`` through ``runpy``, as ``-m`` does) and, when the
interpreter ends -- whatever ended it -- write its ``os.environ`` and the plugin's state to the JSON file named by
the first argument. The command line still names ``sglang.launch_server``: the plugin sees SGLang's server CLI.

``python server_cli_probe.py OUT.json sglang.launch_server --model-path ...``
"""

import atexit
import json
import os
import runpy
import sys


def _report(out: str) -> None:
    state = sys.modules.get("sglang_eagle_nccl.inproc.boot.state")
    st = getattr(state, "STATE", None)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({
            "environ": dict(os.environ),
            "refused": getattr(st, "refused", None),
            "active": getattr(st, "active", None),
            "sglang_loaded": "sglang" in sys.modules,
            "launch_opened": getattr(st, "run_dir", None),
        }, f)


def main() -> None:
    out, module = sys.argv[1], sys.argv[2]
    atexit.register(_report, out)
    sys.argv = [module, *sys.argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

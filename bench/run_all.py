#!/usr/bin/env python3
"""Run every benchmark and print one table (medians, ratios, goals). Needs ./ci/quickstart first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ["interpreter_start.py", "activation_cost.py", "import_engine.py", "preflight_time.py"]


def main() -> int:
    rows = []
    for script in SCRIPTS:
        print(f"[bench] {script} ...", file=sys.stderr, flush=True)
        out = subprocess.run([sys.executable, str(HERE / script), "--json"], capture_output=True, text=True, cwd=HERE)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return out.returncode
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    for r in rows:
        measured = {k: v for k, v in r.items() if k.startswith(("median", "ratio"))}
        print(f"{r['benchmark']}: {measured}  goal {r['goal']}")
    print(json.dumps({"machine": rows[0]["machine"], "results": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

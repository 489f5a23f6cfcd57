#!/usr/bin/env python3
"""The "ran" tier: SGLang's real launch code, run on CPU with the plugin, on every release the manifests single out.

    python3 ci/ran.py                       # every selected release (newest first); rewrites ci/ran_results.json
    python3 ci/ran.py --versions 0.5.23,0.5.4.post3   # only these (their entries are replaced, the rest kept)
    python3 ci/ran.py --list                # the selection and why each release is in it; runs nothing

The compatibility matrix (ci/matrix.py) *reads* every release's source; this tier *runs* a chosen set of
them. The rule that chooses them (:func:`select`), so that a new boundary cannot go without a run:

- every version bound a patch manifest draws (``patches/*.toml``: a patch set's ``versions``, a hook's
  ``versions``, a ``relies_on`` statement's ``versions``) gives both sides of the bound among the
  published releases of ``ci/versions.toml``: for ``>=B`` / ``<B`` the newest release below ``B`` and the
  oldest at or above it (for ``>B`` / ``<=B``: the newest at or below, the oldest above); a side with no
  release (below the oldest) is absent;
- the newest release of each minor line (``0.4.x``, ``0.5.x``).

``==B`` counts as ``>=B,<=B`` (B and its neighbours on both sides). Other operators (``!=``, ``~=``) and versions that are not ``X.Y.Z`` or ``X.Y.Z.postN`` are
refused (an error naming the manifest), never guessed.

For each release: ``ci/sglang_venv.py build X --plugin-wheel W`` (cached venvs on the shared base;
the plugin wheel is built once per run from this checkout), then ``ci/ran_probe.py`` inside that venv
with ``SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS=1`` (what it runs: its docstring). Each release's record says
when it ran, each step ``ok`` / ``fail`` / ``n/a`` with its reason, the result, and the verdict of the
plugin's audit over the records the run's processes wrote. ``ci/matrix.py`` shows them as the "ran"
column of docs/compatibility.md.

Not part of ``ci/test`` or ``.ci/run`` (minutes per release: docs/development.md has the figures).
Standard library only at the top level: it runs before any venv exists.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

CI = Path(__file__).resolve().parent
REPO = CI.parent
sys.path.insert(0, str(CI))
import progress  # noqa: E402 - ci/ is not a package
from cache_root import cache_root  # noqa: E402

VERSIONS_TOML = CI / "versions.toml"
PATCHES = REPO / "patches"
RESULTS = CI / "ran_results.json"
PROBE = CI / "ran_probe.py"
SGLANG_VENV = CI / "sglang_venv.py"
STEPS = ("args", "set_envs", "init", "groups", "eagle", "audit")
STEP_TITLES = {
    "args": "argument resolution (ServerArgs parsing with the --nccl-* flags, prepare_server_args / resolve_once)",
    "set_envs": "engine._set_envs_and_config (SGLang's NCCL writes reported, the profile restored)",
    "init": "a scheduler's distributed init, TP = 2, gloo, in 2 spawned ranks",
    "groups": "the group creation the hooks wrap (GroupCoordinator; PyNccl where built)",
    "eagle": "the EAGLE draft's group wiring (draft_tp_context)",
    "audit": "the audit verdict over the run's records",
}

_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$")
_BOUND = re.compile(r"^\s*(>=|<=|>|<|==|!=|~=)\s*(\S+?)\s*$")


def release_key(version: str) -> tuple[int, int, int, int]:
    """Order of ``X.Y.Z`` and ``X.Y.Z.postN`` (a post release after its release); anything else is refused."""
    m = _RELEASE.match(version)
    if not m:
        raise ValueError(f"not a release version this tier orders: {version!r} (X.Y.Z or X.Y.Z.postN)")
    return int(m[1]), int(m[2]), int(m[3]), -1 if m[4] is None else int(m[4])


def bounds_of(spec: str, where: str) -> list[tuple[str, str]]:
    """The ``(operator, version)`` bounds of one specifier string (``">=0.5.11,<0.5.13"``)."""
    out = []
    for part in spec.split(","):
        if not part.strip():
            continue
        m = _BOUND.match(part)
        if not m or m[1] in ("!=", "~="):
            raise ValueError(f"{where}: version bound {part.strip()!r} is not one of >=, <, >, <=, == X.Y.Z[.postN]")
        try:
            release_key(m[2])
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        # ==B is the range >=B,<=B: its neighbours on both sides and B itself are run.
        out += [(">=", m[2]), ("<=", m[2])] if m[1] == "==" else [(m[1], m[2])]
    return out


def manifest_specs(manifest: dict, name: str) -> list[tuple[str, str]]:
    """Every version specifier one manifest draws, with where it is (for the reason and errors)."""
    found = []
    ps = manifest.get("patch_set", {})
    if ps.get("versions"):
        found.append((ps["versions"], f"{name}: patch set"))
    for hook in manifest.get("hook", []):
        if hook.get("versions"):
            found.append((hook["versions"], f"{name}: hook {hook.get('target', '?')}"))
        for reliance in hook.get("relies_on", []):
            if reliance.get("versions"):
                found.append((reliance["versions"], f"{name}: {hook.get('target', '?')} relies_on"))
    return found


def select(releases: list[str], specs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """The releases to run and why each one (see the module docstring for the rule)."""
    ordered = sorted(releases, key=release_key)
    why: dict[str, list[str]] = {}

    def add(version: str | None, reason: str) -> None:
        if version is not None and reason not in why.setdefault(version, []):
            why[version].append(reason)

    for spec, where in specs:
        for op, bound in bounds_of(spec, where):
            b = release_key(bound)
            inclusive_low = op in (">=", "<")  # the bound itself sits on the upper side
            below = [v for v in ordered if (release_key(v) < b if inclusive_low else release_key(v) <= b)]
            above = [v for v in ordered if (release_key(v) >= b if inclusive_low else release_key(v) > b)]
            side = f"{op}{bound} ({where.split(':')[0]})"  # the manifest file: its hooks say the rest
            add(below[-1] if below else None, f"below {side}")
            add(above[0] if above else None, f"at {side}" if inclusive_low else f"above {side}")
    lines: dict[tuple[int, int], str] = {}
    for v in ordered:
        lines[release_key(v)[:2]] = v
    for (major, minor), v in lines.items():
        add(v, f"newest of {major}.{minor}.x")
    return {v: sorted(why[v]) for v in sorted(why, key=release_key, reverse=True)}


def _toml(path: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10: the plugin's own reader (the repository is on sys.path)
        sys.path.insert(0, str(REPO))
        from sglang_eagle_nccl.knowledge._toml import loads

        return loads(path.read_text("utf-8"))
    return tomllib.loads(path.read_text("utf-8"))


def published_releases(path: Path = VERSIONS_TOML) -> list[str]:
    return [r["version"] for r in _toml(path)["release"]]


def all_specs(patches: Path = PATCHES) -> list[tuple[str, str]]:
    specs = []
    for manifest in sorted(patches.glob("*.toml")):
        specs += manifest_specs(_toml(manifest), manifest.name)
    return specs


def default_selection() -> dict[str, list[str]]:
    return select(published_releases(), all_specs())


# --- what a probe result says, step by step ----------------------------------------------------------------


def _s(status: str, detail: str) -> dict[str, str]:
    return {"status": status, "detail": detail}


def summarize(probe: dict) -> dict[str, dict[str, str]]:
    """Each step's status and reason from one probe result (ci/ran_probe.py's JSON)."""
    launcher = probe.get("launcher", {})
    audit = probe.get("audit", {})
    procs = audit.get("processes", [])
    launcher_rec = next((p for p in procs if p.get("role") == "launcher"), {})
    schedulers = [p for p in procs if str(p.get("role", "")).startswith("scheduler")]
    err = launcher.get("error")
    steps: dict[str, dict[str, str]] = {}

    flags, resolution = launcher.get("flags"), launcher.get("resolution")
    if flags and resolution:
        ok = flags["status"] == "ok" and resolution["status"] == "ok"
        steps["args"] = _s("ok" if ok else "fail", f"{flags['detail']}; {resolution['detail']}")
    else:
        steps["args"] = _s("fail", err or "the launcher stopped before argument resolution")
    set_envs = launcher.get("set_envs")
    if set_envs:
        events = launcher_rec.get("events", {})
        restored = events.get("env_restored", 0) > 0
        writes = ", ".join(launcher_rec.get("sglang_writes", [])) or "none"
        steps["set_envs"] = _s("ok" if restored else "fail",
                               f"{set_envs['detail']} (start method {set_envs.get('start_method')}); SGLang's writes "
                               f"reported: {writes}; profile restored: {'yes' if restored else 'NO env_restored record'}")
    else:
        steps["set_envs"] = _s("fail", err if flags and resolution else "not reached")

    ranks = launcher.get("ranks") or []
    if not ranks:
        steps["init"] = _s("fail", "no rank was started" if set_envs else "not reached")
    else:
        bad = [f"rank {r['rank']}: {r.get('error') or 'no init'}" for r in ranks if r.get("init", {}).get("status") != "ok"]
        steps["init"] = _s("fail", "; ".join(bad)) if bad else _s(
            "ok", f"{ranks[0]['init']['detail']} ({len(ranks)} ranks, {launcher.get('ranks_seconds')} s)")

    if steps["init"]["status"] != "ok":
        steps["groups"] = _s("fail", "not reached (distributed init failed)")
        steps["eagle"] = _s("fail", "not reached (distributed init failed)")
    else:
        built = sorted({g["name"].split(":")[0] for r in ranks for g in r.get("groups", [])})
        hooked = [set(p.get("groups", [])) for p in schedulers]
        pynccl_objs = sorted({g["name"].split(":")[0] for r in ranks for g in r.get("groups", []) if g.get("pynccl")})
        pynccl_hooked = sorted(set().union(*[set(p.get("pynccl", [])) for p in schedulers])) if schedulers else []
        missing = [g for g in built if not hooked or any(g not in h for h in hooked)]
        unhooked_pynccl = [g for g in pynccl_objs if g not in pynccl_hooked]
        problems = []
        if len(schedulers) != len(ranks):
            problems.append(f"audit records from {len(schedulers)} scheduler(s) of {len(ranks)}")
        if missing:
            problems.append(f"groups built without a group_created record: {', '.join(missing)}")
        if unhooked_pynccl:
            problems.append(f"PyNccl built without a pynccl_created record: {', '.join(unhooked_pynccl)}")
        pyn = (f"PyNcclCommunicator built for {', '.join(pynccl_objs)} and hooked; its NCCL communicator is GPU-only "
               "(library not loadable on CPU)") if pynccl_objs else "no PyNcclCommunicator built on CPU by this release"
        steps["groups"] = _s("fail" if problems else "ok",
                             "; ".join(problems) if problems else
                             f"GroupCoordinator hooked for every group built ({', '.join(built)}) on each rank; {pyn}")
        eagle = [r.get("eagle") or {"status": "fail", "detail": "no EAGLE step result"} for r in ranks]
        worst = next((e for e in eagle if e["status"] == "fail"), eagle[0])
        steps["eagle"] = _s(worst["status"], worst["detail"])

    verdict = audit.get("verdict")
    if verdict is None:
        steps["audit"] = _s("fail", audit.get("error") or "no audit")
    else:
        detail = f"verdict {verdict}; processes: {', '.join(audit.get('process_verdicts', []))}"
        if audit.get("problems"):
            detail += "; problems: " + " | ".join(audit["problems"])
        steps["audit"] = _s("ok" if verdict == "ok" else "fail", detail)
    return steps


def result_of(steps: dict[str, dict[str, str]]) -> str:
    return "fail" if any(s["status"] == "fail" for s in steps.values()) else "ok"


# --- running ---------------------------------------------------------------------------------------------


def _say(text: str) -> None:
    print(text, flush=True)


def build_plugin_wheel(parent: Path) -> Path:
    """The plugin wheel of this checkout, in a folder of this run's own (two runs never share one)."""
    parent.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix="wheel-", dir=parent))
    code, lines, elapsed = progress.run(
        [sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--no-deps", str(REPO), "-w", str(out)],
        what="building the plugin wheel", say=lambda t: _say(f"[ran] {t}"))
    if code != 0:
        sys.exit("[ran] building the plugin wheel failed:\n" + "\n".join(lines[-30:]))
    return next(out.glob("sglang_eagle_nccl-*.whl"))


def run_release(version: str, wheel: Path, label: str, started: float) -> dict:
    def say(text: str) -> None:
        _say(f"[ran {label} {version} {time.monotonic() - started:.0f}s] {text}")

    entry: dict = {"version": version, "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    t0 = time.monotonic()
    code, lines, _ = progress.run([sys.executable, str(SGLANG_VENV), "build", version, "--plugin-wheel", str(wheel)],
                                  what="venv (ci/sglang_venv.py build)", say=say)
    entry["venv_seconds"] = round(time.monotonic() - t0, 1)
    entry["venv_cached"] = any("cached venv is up to date" in ln and f"[sglang-venv {version}]" in ln for ln in lines)
    if code != 0:
        reason = next((ln for ln in reversed(lines) if ln.strip()), "venv build failed")
        # Where SGLang's import stopped: the innermost frame of the traceback the import check printed.
        frame = next((ln.strip() for ln in reversed(lines) if ln.strip().startswith('File "')), "")
        if "site-packages/" in frame:
            reason = f"{reason} (at {frame.split('site-packages/', 1)[1].replace(chr(34), '')})"
        entry["steps"] = {s: _s("fail" if s == "args" else "fail", f"venv build failed: {reason[-300:]}" if s == "args"
                                else "not reached (no venv)") for s in STEPS}
        entry["result"] = "fail"
        return entry
    venv = subprocess.run([sys.executable, str(SGLANG_VENV), "path", version], capture_output=True, text=True,
                          check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix=f"ran-{version}-") as work:
        out = Path(work) / "probe.json"
        env = dict(os.environ, SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS="1", PYTHONWARNINGS="ignore")
        t1 = time.monotonic()
        code, lines, _ = progress.run([str(Path(venv) / "bin" / "python"), str(PROBE), "--out", str(out),
                                       "--work", str(Path(work) / "w")],
                                      what="probe (launcher, 2 scheduler ranks, audit)", say=say, env=env)
        entry["probe_seconds"] = round(time.monotonic() - t1, 1)
        try:
            probe = json.loads(out.read_text())
        except (OSError, ValueError):
            probe = {"launcher": {"error": f"the probe wrote no result (exit {code}): "
                                  + " | ".join(ln for ln in lines[-5:] if ln.strip())[-400:]}}
    entry["sglang_reported"] = probe.get("launcher", {}).get("sglang")
    entry["steps"] = summarize(probe)
    entry["result"] = result_of(entry["steps"])
    if entry["result"] == "fail" and probe.get("stderr_tail"):
        entry["stderr_tail"] = probe["stderr_tail"][-1200:]
    return entry


_LOCAL_PATH = re.compile(r"(?:/[^\s'\"():]+)+/(site-packages/|sglang_eagle_nccl/|ci/)")
_TMP_PATH = re.compile(r"/tmp/[^\s'\"():]+")


def scrub(value: object) -> object:
    """This machine's paths out of what is committed: a file under a venv keeps its path from
    ``site-packages/`` on, a temporary directory becomes ``<tmp>``."""
    if isinstance(value, str):
        return _TMP_PATH.sub("<tmp>", _LOCAL_PATH.sub(r"\1", value))
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def load_results(path: Path = RESULTS) -> dict:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {"releases": {}}


def write_results(data: dict, path: Path = RESULTS) -> None:
    """``releases``: what ran. ``pending`` (written by hand, never by this script): selected releases not run
    yet, each with why; the plain tier accepts nothing else missing, and a run removes its entry."""
    data["releases"] = {v: data["releases"][v] for v in sorted(data["releases"], key=release_key, reverse=True)}
    path.write_text(json.dumps(scrub(data), indent=1, ensure_ascii=False) + "\n", "utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", help="comma-separated releases to run (default: the selection)")
    ap.add_argument("--list", action="store_true", help="print the selection and why; run nothing")
    ap.add_argument("--plugin-wheel", type=Path, help="use this plugin wheel (default: build one from this checkout)")
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    selection = default_selection()
    if args.list:
        for v, why in selection.items():
            _say(f"{v}: {'; '.join(why)}")
        _say(f"{len(selection)} releases")
        return 0
    chosen = [v.strip() for v in args.versions.split(",")] if args.versions else list(selection)
    for v in chosen:
        release_key(v)
    started = time.monotonic()
    wheel = args.plugin_wheel.resolve() if args.plugin_wheel else build_plugin_wheel(cache_root() / "ran")
    data = load_results(args.results)
    data["command"] = "python3 ci/ran.py"
    data["steps"] = STEP_TITLES
    failed = []
    for i, version in enumerate(chosen, 1):
        entry = run_release(version, wheel, f"{i}/{len(chosen)}", started)
        entry["why"] = selection.get(version, ["asked for with --versions"])
        data["releases"][version] = entry
        data.get("pending", {}).pop(version, None)  # it ran: no longer owed
        write_results(data, args.results)  # after each release: an interrupted run keeps what ran
        marks = " ".join(f"{s} {entry['steps'][s]['status']}" for s in STEPS)
        _say(f"[ran {i}/{len(chosen)} {version} {time.monotonic() - started:.0f}s] {entry['result'].upper()}: {marks}")
        if entry["result"] != "ok":
            failed.append(version)
    _say(f"[ran] {len(chosen) - len(failed)}/{len(chosen)} releases ran clean in {time.monotonic() - started:.0f}s"
         + (f"; failed: {', '.join(failed)}" if failed else "") + f"; results in {args.results}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

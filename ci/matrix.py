#!/usr/bin/env python3
"""Compatibility matrix: prove every patch manifest, target and stated behaviour, on every published SGLang release.

For each release in ci/versions.toml (every published release from 0.4.3 on) this takes the
published wheel (`pip download --no-deps`, cached under the cache directory's wheels/, never
committed), selects the patch set the plugin would use, and checks in the wheel's source (parsed,
never imported):

1. every hook target that applies to the release exists with the parameters its handler reads;
2. every behaviour the hook states (`relies_on`) holds, through a static call graph over SGLang's
   own calls (sglang_eagle_nccl/knowledge/sglang/callgraph.py, at most callgraph.MAX_DEPTH calls
   deep), judged by sglang_eagle_nccl/knowledge/sglang/proof.py (the same checker start-up and
   `doctor` run on an installed SGLang): the named NCCL variables are written inside the target,
   the named *definition* (not a namesake) is called inside it (so a `before` hook precedes it),
   each with no condition on the path or only the conditions the statement states (`when`);
3. every write of a correctness variable (`[patch_set.correctness_writes]`, e.g. deterministic
   inference's NCCL_ALGO) anywhere in SGLang's package is reachable from a hook that claims it, so a
   write that moved to a method hooked only from a later release fails here, naming where it went;
4. the patch set's mechanism matches the wheel (SGLang's plugin loader from 0.5.11).

It writes docs/compatibility.md (and JSON with --json) and exits 1 on any failure, naming the
release, the hook and what moved. Results are cached per wheel under the cache directory's
matrix/, keyed by the wheel and a digest of the manifests and the analysing code.

    python ci/matrix.py [--offline] [--json] [--no-cache]   check every release, write the docs
    python ci/matrix.py --add 0.5.24 [--why TEXT]            add a release: versions.toml, manifests' tested
                                                              lists, patches/index.json, then the full check
    python ci/matrix.py --add-latest                          the same for the newest release on the package index
    python ci/matrix.py --sync                                only rewrite the tested lists and the index
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from packaging.specifiers import SpecifierSet  # noqa: E402
from packaging.version import Version  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cache_root import cache_root  # noqa: E402 - the CI scripts' one cache rule (ci/cache_root.py)

from sglang_eagle_nccl.contract import versions as pep440  # noqa: E402
from sglang_eagle_nccl.knowledge._toml import loads as toml_loads  # noqa: E402
from sglang_eagle_nccl.knowledge.sglang import callgraph, manifest_index, patchsets, proof  # noqa: E402

VERSIONS = REPO / "ci" / "versions.toml"
# What decides a release's result besides its wheel: a change to any of these re-checks every release.
ANALYSIS_SOURCES = (
    Path(__file__).resolve(),
    REPO / "sglang_eagle_nccl" / "knowledge" / "sglang" / "callgraph.py",
    REPO / "sglang_eagle_nccl" / "knowledge" / "sglang" / "callgraph_names.py",
    REPO / "sglang_eagle_nccl" / "knowledge" / "sglang" / "callgraph_conditions.py",
    REPO / "sglang_eagle_nccl" / "knowledge" / "sglang" / "proof.py",
    REPO / "sglang_eagle_nccl" / "knowledge" / "sglang" / "patchsets.py",
    REPO / "sglang_eagle_nccl" / "contract" / "versions.py",
    REPO / "sglang_eagle_nccl" / "contract" / "hook_target.py",
)




def cache_dir() -> Path:
    return cache_root() / "wheels"


def find_wheel(folder: Path, version: str) -> Path | None:
    for path in folder.glob(f"sglang-{version}-*.whl"):
        return path
    return None


def fetch_wheel(version: str, folder: Path, offline: bool) -> Path:
    wheel = find_wheel(folder, version)
    if wheel:
        return wheel
    if offline:
        raise SystemExit(f"wheel for sglang {version} not in {folder} and --offline given")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"[matrix] downloading sglang=={version} ...", flush=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
         f"sglang=={version}", "-d", str(folder)],
        check=True,
    )
    wheel = find_wheel(folder, version)
    if wheel is None:
        raise SystemExit(f"pip download did not produce a wheel for sglang {version}")
    return wheel


def zip_reader(zf: zipfile.ZipFile):
    names = set(zf.namelist())

    def read(rel: str) -> str | None:
        return zf.read(rel).decode("utf-8", "replace") if rel in names else None

    return read


class SharedModules:
    """Parsed modules reused from the previous release when a file is byte-identical (most are,
    between neighbouring releases): parsing is most of the matrix's time."""

    def __init__(self) -> None:
        self.previous: dict[tuple[str, str], object] = {}

    def tree(self, read, callbacks=()) -> callgraph.SourceTree:
        texts: dict[str, str] = {}

        def cached_read(rel: str) -> str | None:
            if rel not in texts:
                text = read(rel)
                if text is None:
                    return None
                texts[rel] = text
            return texts[rel]

        tree = callgraph.SourceTree(cached_read, callback_helpers=callbacks)
        loader = tree._load
        previous = self.previous
        current: dict[tuple[str, str], object] = {}

        def load(name: str):
            base = name.replace(".", "/")
            for rel in (base + ".py", base + "/__init__.py"):
                text = cached_read(rel)
                if text is not None:
                    key = (rel, hashlib.sha1(text.encode("utf-8", "replace")).hexdigest())
                    module = previous.get(key) or loader(name)
                    current[key] = module
                    return module
            return None

        tree._load = load  # type: ignore[method-assign]
        self.current = current
        return tree

    def done(self) -> None:
        self.previous = self.current


# --- one release -----------------------------------------------------------------------------------


def parsed_by(tree: callgraph.SourceTree, module: str):
    """``ast.parse`` for the hook check, answered by the call graph's own parse of ``module`` (the very
    text the check reads: both come from one reader) instead of a second parse of the same file."""
    def parse(text: str):
        loaded = tree.module(module)
        if loaded is not None and tree._read(loaded.path) == text:
            return loaded.tree
        return ast.parse(text)

    return parse


def check_reliance(tree: callgraph.SourceTree, hook, reliance, names: list[str]) -> dict:
    """One stated behaviour on one release: held (with the path that proves it) or failed (with the reason)."""
    return proof.prove(tree, hook.target, reliance,
                       elsewhere=lambda variables: writes_anywhere(tree, variables, names=names)).to_dict()


def writes_anywhere(tree: callgraph.SourceTree, variables, *, names: list[str] | None = None) -> list[callgraph.EnvWrite]:
    """Every write of ``variables`` in SGLang's package (a text search picks the modules to parse)."""
    out: list[callgraph.EnvWrite] = []
    for rel in names or []:
        if not rel.endswith(".py") or not rel.startswith("sglang/") or rel.startswith("sglang/test/"):
            continue
        text = tree._read(rel)
        if text is None or "environ" not in text or not any(v in text for v in variables):
            continue
        module = rel[:-3].replace("/", ".")
        if module.endswith(".__init__"):
            module = module[: -len(".__init__")]
        out += callgraph.writes_in_module(tree, module, variables)
    return out


def check_version(version: str, wheel: Path, sets, shared: SharedModules | None = None) -> dict:
    with zipfile.ZipFile(wheel) as zf:
        return check_source(version, zip_reader(zf), zf.namelist(), sets, shared)


def check_source(version: str, read, names: list[str], sets, shared: SharedModules | None = None) -> dict:
    """One release's source, read through ``read(relative_path)`` (its wheel, or a forged copy: tests/forgery)."""
    selection = patchsets.select(version, sets)
    v = Version(version)
    patch_set = selection.patch_set
    rows = []
    failures: list[str] = []
    # SGLang helpers that call the function passed to them, as the patch set's statements name them
    callbacks = {c for h in patch_set.hooks for r in h.relies_on for c in r.callbacks}
    tree = shared.tree(read, callbacks) if shared else callgraph.SourceTree(read, callback_helpers=callbacks)
    read = tree._read
    has_plugins = read("sglang/srt/plugins/hook_registry.py") is not None
    claims: dict[str, list[str]] = {}  # variable -> starts of applicable writes statements
    for hook in patch_set.hooks:
        row = {"target": hook.target, "required": hook.required, "handler": hook.handler}
        # Outside its version gate a hook does not apply, whoever's target it is ("–"); a third-party
        # target inside it is external ("·"): not SGLang's source to check.
        if not hook.applies_to(v):
            rows.append({**row, "status": "n/a"})
            continue
        if not hook.is_sglang:
            rows.append({**row, "status": "external"})
            continue
        check = patchsets.check_hook_with_reader(read, hook, parse=parsed_by(tree, hook.module))
        row.update(file=check.file, line=check.line)
        if not check.ok:
            rows.append({**row, "status": "missing", "reason": check.reason})
            failures.append(f"{hook.target}: {check.reason}")
            continue
        behaviours = []
        for reliance in hook.relies_on:
            if not reliance.applies_to(v):
                continue
            result = check_reliance(tree, hook, reliance, names)
            behaviours.append(result)
            if reliance.kind == "writes":
                for variable in reliance.subject:
                    claims.setdefault(variable, []).append(reliance.start or hook.target)
            if not result["ok"]:
                failures.append(f"hook {hook.target} relies on SGLang: it {result['statement']} ({reliance.why}), "
                                f"but {result['reason']}")
        status = "ok" if all(b["ok"] for b in behaviours) else "behaviour"
        rows.append({**row, "status": status if behaviours else "exists", "behaviours": behaviours})
    correctness = sorted({var for _, variables in patch_set.correctness_writes for var in variables})
    guarded = []
    for write in writes_anywhere(tree, correctness, names=names):
        starts = claims.get(write.variable, [])
        proof = None
        for start in starts:
            # Any path counts here, conditional or not: a write that can happen inside the hooked call is seen.
            r = callgraph.reach(tree, start, calls=[write.function], accept=lambda c: True)
            if r.reaches(write.function) is not None or write.function == start:
                proof = start
                break
        guarded.append({"variable": write.variable, "at": write.where(), "by": proof})
        if proof is None:
            claimed = f"claimed only from {', '.join(starts)}" if starts else "no hook of the set claims it on this release"
            failures.append(f"correctness write {write.variable} at {write.where()} is not reachable from any hook "
                            f"({claimed}): a profile could override it silently")
    mech_ok = (patch_set.mechanism == "hook_registry") == has_plugins
    if not mech_ok:
        failures.append(f"manifest says mechanism {patch_set.mechanism} but the wheel "
                        f"{'has' if has_plugins else 'lacks'} sglang/srt/plugins")
    return {
        "version": version,
        "patch_set": patch_set.id,
        "status": selection.status,
        "mechanism": patch_set.mechanism,
        "native_plugins": has_plugins,
        "mechanism_ok": mech_ok,
        "hooks": rows,
        "correctness_writes": guarded,
        "failures": failures,
        "ok": not failures,
    }


# --- caching -------------------------------------------------------------------------------------------


def analysis_digest(manifests: Path) -> str:
    h = hashlib.sha256()
    for path in (*ANALYSIS_SOURCES, *sorted(manifests.glob("*.toml"))):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def cached_result(wheel: Path, digest: str) -> tuple[Path, dict | None]:
    path = cache_root() / "matrix" / f"{wheel.name}.{digest}.json"
    try:
        return path, json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return path, None


# --- the tested lists ----------------------------------------------------------------------------------


def read_releases(path: Path = VERSIONS) -> list[dict]:
    return toml_loads(path.read_text("utf-8"))["release"]


def sync_tested(manifests: Path, releases: list[str]) -> list[str]:
    """Write each manifest's `tested` list and `tested_through` from the releases the matrix checks."""
    changed = []
    for path in sorted(manifests.glob("*.toml")):
        text = path.read_text("utf-8")
        spec = SpecifierSet(toml_loads(text)["patch_set"]["versions"])
        mine = sorted((r for r in releases if spec.contains(Version(r), prereleases=True)), key=Version)
        if not mine:
            raise SystemExit(f"{path.name}: no release of ci/versions.toml is in its range {spec}")
        chunks, line = [], "tested = ["
        for r in mine:
            item = f'"{r}", '
            if len(line) + len(item) > 110:
                chunks.append(line.rstrip())
                line = "  "
            line += item
        chunks.append(line.rstrip(", ") + "]")
        block = "\n".join(chunks)
        new = re.sub(r'^tested_through = "[^"]*"$', f'tested_through = "{mine[-1]}"', text, count=1, flags=re.M)
        if re.search(r"^tested = \[", new, flags=re.M):
            new = re.sub(r"^tested = \[[^\]]*\]", block, new, count=1, flags=re.M)
        else:
            new = re.sub(r'^(tested_through = "[^"]*")$', lambda m, block=block: m.group(1) + "\n" + block, new,
                         count=1, flags=re.M)
        if new != text:
            path.write_text(new, "utf-8")
            changed.append(path.name)
    patchsets.load_manifests.cache_clear()
    manifest_index.main([str(manifests)])
    return changed


def newest_published() -> str:
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "sglang", "--disable-pip-version-check"],
                         capture_output=True, text=True, check=True).stdout
    listed = re.search(r"Available versions: (.*)", out)
    if not listed:
        raise SystemExit(f"pip index versions sglang printed no list:\n{out}")
    found = [Version(v.strip()) for v in listed.group(1).split(",")]
    return str(max(v for v in found if not v.is_prerelease and not v.is_devrelease))


def add_release(version: str, why: str | None, path: Path = VERSIONS) -> bool:
    try:
        v = pep440.parse(version)
    except Exception:  # noqa: BLE001 - packaging's InvalidVersion
        raise SystemExit(f"--add {version!r}: not a PEP 440 version; give a published release such as 0.5.24") from None
    if v.is_prerelease or v.is_devrelease or v.local is not None:
        raise SystemExit(f"--add {version}: only published releases are matrix rows (pre-releases and dev builds are "
                         "checked against their own source at start-up)")
    known = [r["version"] for r in read_releases(path)]
    if str(v) in known:
        print(f"[matrix] sglang {v} is already in {path.name}")
        return False
    entry = f'[[release]]\nversion = "{v}"\n' + (f'why = "{why}"\n' if why else "")
    text = path.read_text("utf-8")
    later = [k for k in known if Version(k) > v]
    if later:
        anchor = f'[[release]]\nversion = "{min(later, key=Version)}"\n'
        text = text.replace(anchor, entry + anchor, 1)
    else:
        text = text.rstrip("\n") + "\n" + entry
    path.write_text(text, "utf-8")
    print(f"[matrix] added sglang {v} to {path.name}")
    return True


# --- the page ----------------------------------------------------------------------------------------


def short(target: str) -> str:
    module, qual = target.split(":")
    # The module's last part where the name alone repeats (EAGLE workers; the offline benchmark's Ray
    # backend, which moved from sglang.bench_offline_throughput to sglang.benchmark.offline_throughput).
    named = module.startswith("sglang.srt.speculative") or qual == "_create_ray_engine_backend"
    return f"{module.rsplit('.', 1)[1]}.{qual}" if named else qual


MARKS = {"ok": "✓", "exists": "○", "behaviour": "✗", "missing": "✗", "n/a": "–", "external": "·"}


def render_row(result: dict, targets: list[str]) -> str:
    """One release's row of the table: its version, patch set, mechanism and one mark per hook target."""
    cells = []
    for t in targets:
        h = next((x for x in result["hooks"] if x["target"] == t), None)
        cells.append(MARKS[h["status"]] if h else "–")
    mech = result["mechanism"] + ("" if result["mechanism_ok"] else " ✗")
    return f"| {result['version']} | {result['patch_set']} | {mech} | " + " | ".join(cells) + " |"


def _proof_text(b: dict) -> str:
    """How a behaviour was proven: the path (or each variable's write and path), and the stated conditions it needed."""
    proof = b.get("path") or "; ".join(f"{p['variable']} at {p['at']} via {p['path']}" for p in b.get("proofs", []))
    if b.get("conditions"):
        proof += " — only under " + "; ".join(b["conditions"])
    return proof


def render_markdown(results: list[dict], sets) -> str:
    targets: list[str] = []
    for r in results:
        for h in r["hooks"]:
            if h["target"] not in targets:
                targets.append(h["target"])
    lines = [
        "# SGLang compatibility matrix",
        "",
        f"Generated by `python ci/matrix.py` from the real published wheels of all {len(results)} SGLang releases "
        f"from {results[0]['version']} to {results[-1]['version']} (post releases included; 0.5.0 was never "
        "published); do not edit by hand.",
        "",
        "✓ the target exists with the parameters its handler reads **and** every behaviour its hook relies on "
        "(`relies_on` in the manifest) was proven from the release's source; ✗ the target or a behaviour is "
        "missing (the matrix fails); ○ the target exists and the hook claims no behaviour on this release; "
        "– not applicable to this release; · third-party target (checked when patched).",
        "",
        "What a ✓ proves (`sglang_eagle_nccl/knowledge/sglang/proof.py`): each call on the path resolves, through "
        "imports, aliases, `self.` methods along the class's bases, annotated parameters and instance attributes, "
        "to the exact definition the statement names (a same-named function elsewhere, or a call that cannot be "
        "resolved statically, proves nothing); the behaviour is reached with no condition on the path, or only "
        "under the conditions the statement states (`when`: a test's source text, or a server `--flag` the plugin "
        "checks at run time), listed with file and line under each proof below; a function passed as an "
        "argument counts as called only by a process/thread target, an executor, Ray or a helper the statement "
        "names (`callbacks`), never by `atexit`, a signal handler or a finalizer. It is *checked* (read from "
        "the source), not *ran*. Forged copies of five releases must fail it: `tests/forgery/`.",
        "",
        f"Behaviours are proven on a static call graph over SGLang's own calls, at most {callgraph.MAX_DEPTH} "
        "calls deep (`sglang_eagle_nccl/knowledge/sglang/callgraph.py`). Every release listed here is "
        "*tested*: the plugin reports any other version (never published, pre-release, dev build, newer) as "
        "untested and, at start-up and in `doctor`, checks its targets **and runs the same behaviour proof** "
        "on the installed source.",
        "",
        "| SGLang | patch set | mechanism | " + " | ".join(f"`{short(t)}`" for t in targets) + " |",
        "|---|---|---|" + "---|" * len(targets),
    ]
    lines += [render_row(r, targets) for r in results]
    lines = with_ran(lines)

    lines += ["", "## What each hook relies on, and the proof on the newest release of each patch set", ""]
    newest = {}
    for r in results:
        newest[r["patch_set"]] = r
    for ps in sets:
        r = newest.get(ps.id)
        if r is None:
            continue
        lines += [f"### {ps.id} (proof on {r['version']})", ""]
        for h in r["hooks"]:
            for b in h.get("behaviours", []):
                lines.append(f"- `{short(h['target'])}` {b['statement']}: {b['why']}. Proof: {_proof_text(b)}")
        lines.append("")

    lines += _render_conditions(results)
    lines += ["## Correctness writes and the hook that guards each", "",
              "Every write of a variable SGLang sets for correctness (`[patch_set.correctness_writes]`) found anywhere "
              "in SGLang's package, and the hook target it is reachable from (a profile setting it is refused "
              "unless `sglang_wins` names it).", "", "| SGLang | writes | guarded by |", "|---|---|---|"]
    groups: list[tuple[str, str, list[str]]] = []
    for r in results:
        writes = ", ".join(f"{w['variable']} {w['at']}" for w in r["correctness_writes"]) or "none"
        by = ", ".join(sorted({short(w["by"]) for w in r["correctness_writes"] if w["by"]})) or "–"
        if groups and groups[-1][0] == _strip_lines(writes) and groups[-1][1] == by:
            groups[-1][2].append(r["version"])
        else:
            groups.append((_strip_lines(writes), by, [r["version"]]))
    for writes, by, vs in groups:
        span = vs[0] if len(vs) == 1 else f"{vs[0]} – {vs[-1]}"
        lines.append(f"| {span} | {writes} | {by} |")
    lines += ["", "Targets:", ""]
    lines += [f"- `{t}`" for t in targets]
    return "\n".join(lines) + "\n"


RAN_RESULTS = REPO / "ci" / "ran_results.json"
RAN_MARKS = {"ok": "✓", "fail": "✗", "n/a": "–"}


def with_ran(lines: list[str], path: Path = RAN_RESULTS) -> list[str]:
    """The table in ``lines`` with a "ran" column, then a section of what ran (``ci/ran.py``'s committed results).

    "checked" (the columns before) is read from the wheel's source; "ran" says SGLang's own code ran on CPU
    with the plugin (✓ every step held, ✗ one did not, – this release is not in the ran tier) and when.
    """
    try:
        data = json.loads(path.read_text("utf-8"))
        ran, owed = data["releases"], data.get("pending", {})
    except (OSError, ValueError, KeyError):
        ran, owed = {}, {}
    out = []
    for line in lines:
        cells = line.split(" | ")
        if line.startswith("| SGLang |"):
            line += " ran |"
        elif line.startswith("|---|"):
            line += "---|"
        elif line.startswith("| ") and len(cells) > 1:
            entry = ran.get(cells[0][2:].strip())
            owes = " owed" if cells[0][2:].strip() in owed else ""
            line += f" {RAN_MARKS[entry['result']]} {entry['date'][:10]} |" if entry else f" –{owes} |"
        out.append(line)
    if not ran:
        return out
    steps = list(next(iter(ran.values()))["steps"])
    out += ["", f"## Ran on CPU: {len(ran)} releases (`python3 ci/ran.py`)", "",
            "SGLang's own launch code run on CPU with the plugin active (ci/ran_probe.py says what each step runs; "
            "ci/ran_results.json holds every reason). ✓ ran and held, ✗ failed (reason in the results), – the release "
            "has no such code.", "",
            "| SGLang | ran | " + " | ".join(steps) + " | result |", "|---|---|" + "---|" * len(steps) + "---|"]
    for version, entry in ran.items():
        marks = " | ".join(RAN_MARKS[entry["steps"][s]["status"]] for s in steps)
        out.append(f"| {version} | {entry['date']} | {marks} | {RAN_MARKS[entry['result']]} |")
    if owed:
        out += ["", *(f"- {version}: not run yet ({why})" for version, why in owed.items())]
    return out


def _render_conditions(results: list[dict]) -> list[str]:
    """Where a behaviour holds only under a condition: per hook and behaviour, the releases and the conditions."""
    rows: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for r in results:
        for h in r["hooks"]:
            for b in h.get("behaviours", []):
                if not b.get("ok"):
                    continue
                conds = list(b.get("conditions", []))
                for p in b.get("proofs", []):
                    conds += [c for c in p.get("conditions", []) if c not in conds]
                subject = b["statement"].split(" when ")[0]
                text = "; ".join(re.sub(r" at (\S+\.py):\d+", r" (\1)", c) for c in conds) or "unconditional"
                rows.setdefault((short(h["target"]), subject), []).append((r["version"], text))
    lines = ["## Conditions: where a behaviour holds only under a condition", "",
             "Each stated behaviour, the releases where it was proven, and the conditions on its path (the source "
             "text of SGLang's test and its file; each stated in the manifest's `when`). Rows where every release "
             "is unconditional are left out.", "", "| hook | behaviour | SGLang | only under |", "|---|---|---|---|"]
    for (target, subject), items in rows.items():
        if all(text == "unconditional" for _, text in items):
            continue
        groups: list[tuple[str, list[str]]] = []
        for version, text in items:
            if groups and groups[-1][0] == text:
                groups[-1][1].append(version)
            else:
                groups.append((text, [version]))
        for text, vs in groups:
            span = vs[0] if len(vs) == 1 else f"{vs[0]} – {vs[-1]}"
            escaped = text.replace("|", "\\|")  # a condition's `or` is safe; a bitwise | would split the cell
            lines.append(f"| `{target}` | {subject} | {span} | {escaped} |")
    return [*lines, ""]


def _strip_lines(text: str) -> str:
    """A write's place without its line number, so that releases differing only in line numbers share a row."""
    return re.sub(r"\.py:\d+", ".py", text)


# --- main ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--versions", default=str(VERSIONS))
    ap.add_argument("--manifests", default=None, help="directory of patch manifests (default: the package's)")
    ap.add_argument("--offline", action="store_true", help="use only wheels already in the cache")
    ap.add_argument("--out", default=str(REPO / "docs" / "compatibility.md"))
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--no-cache", action="store_true", help="re-check every release even if a cached result exists")
    ap.add_argument("--add", metavar="VERSION", help="add a published release to the matrix (and the tested lists)")
    ap.add_argument("--add-latest", action="store_true", help="add the newest release on the package index")
    ap.add_argument("--why", default=None, help="with --add: what the release proves, for versions.toml")
    ap.add_argument("--sync", action="store_true", help="only rewrite the manifests' tested lists and the index")
    args = ap.parse_args(argv)

    versions_path = Path(args.versions)
    manifests = Path(args.manifests) if args.manifests else Path(manifest_index.manifest_dir())
    if args.add or args.add_latest:
        add_release(args.add or newest_published(), args.why, versions_path)
    releases = read_releases(versions_path)
    if args.add or args.add_latest or args.sync:
        changed = sync_tested(manifests, [r["version"] for r in releases])
        print(f"[matrix] tested lists: {', '.join(changed) or 'unchanged'}")
        if args.sync:
            return 0
    patchsets.load_manifests.cache_clear()
    sets = patchsets.load_manifests(str(manifests))
    # The tested lists ship in the wheel: they must say exactly which releases this matrix checks.
    stale = sorted(set(r["version"] for r in releases) ^ {t for s in sets for t in s.tested}, key=Version)
    if versions_path.resolve() != VERSIONS.resolve():
        stale = []  # a subset of releases (a test, a quick look): the tested lists are not its business
    folder = cache_dir()
    digest = analysis_digest(manifests)
    shared = SharedModules()
    results = []
    start = time.monotonic()
    fetch_time = 0.0
    for i, rel in enumerate(releases, 1):
        version = rel["version"]
        t0 = time.monotonic()
        wheel = fetch_wheel(version, folder, args.offline)
        fetch_time += time.monotonic() - t0
        cache_path, result = (None, None) if args.no_cache else cached_result(wheel, digest)
        cached = result is not None
        if result is None:
            result = check_version(version, wheel, sets, shared)
            shared.done()
            if cache_path is not None:
                cache_path.parent.mkdir(parents=True, exist_ok=True)
                cache_path.write_text(json.dumps(result), "utf-8")
        results.append(result)
        status = "ok" if result["ok"] else f"FAIL ({len(result['failures'])})"
        print(f"[matrix] {i:2}/{len(releases)} sglang {version:<13} {result['patch_set']:<22} {status}"
              f"{' (cached)' if cached else ''}", flush=True)
        for failure in result["failures"]:
            print(f"           ✗ sglang {version}: {failure}", flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(render_markdown(results, sets), "utf-8")
    if args.json:
        print(json.dumps(results, indent=2))
    failed = [r["version"] for r in results if not r["ok"]]
    depths = [b.get("depth", 0) for r in results for h in r["hooks"] for b in h.get("behaviours", []) if b.get("ok")]
    print(f"[matrix] {len(results)} releases checked in {time.monotonic() - start:.1f}s "
          f"(of which {fetch_time:.1f}s finding or downloading wheels); deepest proof {max(depths, default=0)} calls; "
          f"{'every target and stated behaviour holds' if not failed else 'FAILED: ' + ', '.join(failed)}")
    if stale:
        print(f"[matrix] the manifests' tested lists do not match {versions_path.name} ({', '.join(stale)}): "
              "run `python ci/matrix.py --sync`")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

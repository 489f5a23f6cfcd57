"""``doctor``: what is installed, which patch set applies, what NCCL would read, and from where.

Everything is gathered without importing SGLang or torch (versions come from package
metadata, hook targets are checked in SGLang's source with :mod:`ast`), so ``doctor`` is fast
and works even when SGLang cannot be imported on this machine.
"""

from __future__ import annotations

import os
import pwd
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_eagle_nccl import __version__
from sglang_eagle_nccl.contract.names import nccl_snapshot
from sglang_eagle_nccl.contract.versions import installed_sglang_version, installed_version
from sglang_eagle_nccl.knowledge.sglang import patchsets
from sglang_eagle_nccl.knowledge.sglang.plugin_loader import PLUGIN_NAME, entry_point_allowed
from sglang_eagle_nccl.offline.native_status import format_native_status, native_status


def package_version(name: str) -> str | None:
    """The installed version of a distribution; SGLang's through the one lookup every gate uses."""
    return installed_sglang_version() if name == "sglang" else installed_version(name)


@dataclass(frozen=True)
class ConfFile:
    path: str
    role: str  # "NCCL_CONF_FILE" / "~/.nccl.conf" / "/etc/nccl.conf"
    exists: bool
    values: tuple[tuple[str, str], ...] = ()
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "role": self.role, "exists": self.exists, "values": dict(self.values), "problems": list(self.problems)}


def parse_conf_text(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """NCCL's conf-file rules: ``NAME=value``, split at the first '=', no trimming.

    NCCL 2.26+ skips lines starting with '#'; older NCCL sets a variable literally named
    ``#FOO``. A space around '=' ends up inside the name or value (NCCL ``src/misc/param.cc``
    ``setEnvFile``: split at the first '=', nothing trimmed).
    """
    values: list[tuple[str, str]] = []
    problems: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        if line.startswith("#"):
            problems.append(f"line {lineno}: '#' comments are skipped only by NCCL >= 2.26; older NCCL sets a variable named {line.split('=')[0]!r}")
            continue
        if "=" not in line:
            problems.append(f"line {lineno}: no '=' (ignored by NCCL)")
            continue
        name, value = line.split("=", 1)
        if name != name.strip() or value != value.strip():
            problems.append(f"line {lineno}: spaces around '=' become part of the name/value ({name!r}={value!r})")
        values.append((name, value))
    return values, problems


# An NCCL conf file is a handful of NAME=value lines; the cap only bounds a wrong path.
MAX_CONF_BYTES = 1024 * 1024


def conf_files(environ: Mapping[str, str] | None = None) -> list[ConfFile]:
    env = os.environ if environ is None else environ
    files: list[tuple[str, str]] = []
    conf = env.get("NCCL_CONF_FILE", "")
    if conf:
        files.append((conf, "NCCL_CONF_FILE"))
    else:
        try:
            home = pwd.getpwuid(os.getuid()).pw_dir  # NCCL <= 2.29 uses the passwd entry, 2.30 $HOME
        except KeyError:
            home = env.get("HOME", "~")
        files.append((os.path.join(home, ".nccl.conf"), "~/.nccl.conf"))
    files.append(("/etc/nccl.conf", "/etc/nccl.conf"))
    from sglang_eagle_nccl.contract.files import UnreadableFile, read_regular_file

    out = []
    for path, role in files:
        if not os.path.exists(path):  # a dangling symlink too: NCCL's fopen fails and it reads nothing
            out.append(ConfFile(path, role, False))
            continue
        try:
            # NCCL_CONF_FILE comes from the environment: a FIFO there must not make doctor wait
            # forever, nor a device read without end. NCCL itself follows symlinks (fopen).
            data = read_regular_file(path, MAX_CONF_BYTES, follow_symlinks=True)
        except UnreadableFile as exc:
            out.append(ConfFile(path, role, True, (), (f"unreadable: {exc.reason}",)))
            continue
        values, problems = parse_conf_text(data.decode("utf-8", errors="replace"))
        out.append(ConfFile(path, role, True, tuple(values), tuple(problems)))
    return out


def effective_settings(profile_env: Mapping[str, str], environ: Mapping[str, str], confs: list[ConfFile]) -> list[dict[str, Any]]:
    """What NCCL would read for each variable, given NCCL's precedence.

    The environment always wins (conf files use ``setenv(..., overwrite=0)``), then
    NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf; the profile is applied into the
    environment, so it wins over both files.
    """
    rows: dict[str, dict[str, Any]] = {}
    for cf in reversed(confs):  # lowest precedence first
        for name, value in cf.values:
            rows[name] = {"name": name, "value": value, "source": cf.path}
    for name, value in nccl_snapshot(environ).items():
        rows[name] = {"name": name, "value": value, "source": "environment"}
    for name, value in profile_env.items():
        before = rows.get(name)
        rows[name] = {"name": name, "value": value, "source": "profile"}
        if before and before["value"] != value:
            rows[name]["overrides"] = f"{before['source']}: {before['value']}"
    return [rows[k] for k in sorted(rows)]


@dataclass
class DoctorReport:
    python: str
    plugin: str
    packages: dict[str, str | None]
    sglang_root: str | None
    selection: dict[str, Any] | None
    targets: list[dict[str, Any]]
    bootstrap: dict[str, Any]
    conf_files: list[ConfFile]
    effective: list[dict[str, Any]]
    profile: dict[str, Any] | None
    problems: list[str] = field(default_factory=list)
    native: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "python": self.python,
            "plugin": self.plugin,
            "packages": self.packages,
            "sglang_root": self.sglang_root,
            "selection": self.selection,
            "targets": self.targets,
            "bootstrap": self.bootstrap,
            "conf_files": [c.to_dict() for c in self.conf_files],
            "effective": self.effective,
            "profile": self.profile,
            "problems": self.problems,
            "native": self.native,
        }


def _bootstrap_files() -> dict[str, Any]:
    import site

    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    found = {}
    for name in ("sglang_eagle_nccl.pth", "sglang_eagle_nccl.start"):
        found[name] = next((str(Path(d) / name) for d in dirs if (Path(d) / name).is_file()), None)
    eps = []
    try:
        from importlib.metadata import entry_points

        eps = [f"{ep.name} = {ep.value}" for ep in entry_points(group="sglang.srt.plugins") if "sglang_eagle_nccl" in ep.value]
    except Exception:  # noqa: BLE001
        pass
    found["entry_point"] = eps[0] if eps else None
    found["SGLANG_PLUGINS"] = os.environ.get("SGLANG_PLUGINS")
    return found


def run_doctor(profile: Any = None, problems: list[str] | None = None) -> DoctorReport:
    """Everything doctor shows; ``problems`` start with those the caller found (e.g. a bad profile)."""
    packages = {name: package_version(name) for name in ("sglang", "torch", "wrapt", "click", "packaging", "nvidia-nccl-cu12", "nvidia-nccl-cu13")}
    problems = list(problems or [])
    selection_info = None
    targets: list[dict[str, Any]] = []
    root = None
    if packages["sglang"]:
        root = patchsets.installed_root()
        try:
            sel = patchsets.select(packages["sglang"])
            selection_info = {
                "patch_set": sel.patch_set.id,
                "title": sel.patch_set.title,
                "status": sel.status,
                "why_untested": sel.why_untested,
                "mechanism": sel.patch_set.mechanism,
                "sglang_writes": list(sel.patch_set.sglang_writes),
            }
            if root is not None:
                # Names, parameters and each hook's stated behaviour, proven on the installed source (cached
                # per installed wheel; the same proof as the compatibility matrix).
                cov = patchsets.check_coverage(sel, root, cli=True, prove=True, compute=True)
                for hook, check in cov.checks:
                    targets.append({**check.to_dict(), "required": hook.required, "handler": hook.handler,
                                    "behaviours": (cov.proofs or {}).get(hook.target, [])})
                if cov.missing_required:
                    problems.append(
                        f"{len(cov.missing_required)} required hook target(s) missing or with a behaviour no longer "
                        "proven in the installed SGLang: " + ", ".join(c.target for c in cov.missing_required)
                    )
        except patchsets.PatchSetError as exc:
            problems.append(str(exc))
    else:
        problems.append("sglang is not installed in this Python environment (pip install sglang-eagle-nccl[sglang])")
    if not packages["torch"]:
        problems.append(
            "torch is not installed in this Python environment: SGLang cannot start and no NCCL communicator "
            "can be created here (install the torch build SGLang asks for, e.g. pip install sglang)"
        )
    boot = _bootstrap_files()
    if boot["sglang_eagle_nccl.pth"] is None:
        problems.append(
            "sglang_eagle_nccl.pth is not in site-packages: SGLang's spawned processes will not load the plugin "
            "(install the wheel with pip; an editable install does not ship the .pth)"
        )
    if not entry_point_allowed():
        problems.append(
            f"SGLANG_PLUGINS={boot['SGLANG_PLUGINS']!r} does not list {PLUGIN_NAME}: SGLang will not call the plugin "
            "entry point (the .pth fallback is used)"
        )
    confs = conf_files()
    for cf in confs:
        problems.extend(f"{cf.path}: {p}" for p in cf.problems)
    # What a process of a launch from here holds before it knows its launch (the one process_env).
    from sglang_eagle_nccl.decision.plan import process_env

    profile_env = process_env(profile.to_dict(), None) if profile is not None else {}
    return DoctorReport(
        python=sys.version.split()[0],
        plugin=__version__,
        packages=packages,
        sglang_root=str(root) if root else None,
        selection=selection_info,
        targets=targets,
        bootstrap=boot,
        conf_files=confs,
        effective=effective_settings(profile_env, os.environ, confs),
        profile=profile.to_dict() if profile is not None else None,
        problems=problems,
        native=native_status(),
    )


def format_behaviours(behaviours: list[dict[str, Any]]) -> list[str]:
    """Each stated behaviour (relies_on) of a hook: ✓ with the path that proves it, ✗ with the reason."""
    lines = []
    for b in behaviours:
        if b.get("ok"):
            proof = b.get("path") or "; ".join(f"{p['variable']} at {p['at']} via {p['path']}" for p in b.get("proofs", []))
            under = f" [under {'; '.join(b['conditions'])}]" if b.get("conditions") else ""
            lines.append(f"      ✓ {b['statement']}: {proof}{under}")
        else:
            lines.append(f"      ✗ {b['statement']}: {b.get('reason', '')}")
    return lines


def format_doctor(report: DoctorReport) -> str:
    lines = [f"sglang-eagle-nccl {report.plugin} on Python {report.python}", ""]
    lines.append("Packages")
    for name, ver in report.packages.items():
        lines.append(f"  {name:<18} {ver or '(not installed)'}")
    lines.append("")
    if report.selection:
        s = report.selection
        lines.append(f"Patch set: {s['patch_set']} ({s['status']}, via {s['mechanism']})")
        lines.append(f"  {s['title']}")
        if s.get("why_untested"):
            lines.append(f"  untested: {s['why_untested']}; every hook target below was checked in its source")
        if s["sglang_writes"]:
            lines.append(f"  SGLang itself writes: {', '.join(s['sglang_writes'])}")
        for t in report.targets:
            mark = "✓" if t["ok"] else ("✗" if t["required"] else "⚠")
            where = f"{t['file']}:{t['line']}" if t.get("file") and t.get("line") else (t.get("reason") or "")
            lines.append(f"  {mark} {t['target']:<78} {where}")
            lines.extend(format_behaviours(t.get("behaviours", [])))
        lines.append("")
    if report.native is not None:
        lines += [*format_native_status(report.native), ""]
    lines.append("Bootstrap")
    for k, v in report.bootstrap.items():
        lines.append(f"  {k:<24} {v if v is not None else '-'}")
    lines.append("")
    lines.append("NCCL configuration files (NCCL precedence: environment > NCCL_CONF_FILE or ~/.nccl.conf > /etc/nccl.conf)")
    for cf in report.conf_files:
        lines.append(f"  {cf.role:<16} {cf.path} {'' if cf.exists else '(absent)'}")
        for name, value in cf.values:
            lines.append(f"      {name}={value}")
    lines.append("")
    lines.append("Effective NCCL settings" + (f" with profile '{report.profile['name']}'" if report.profile else " (no profile given)"))
    if not report.effective:
        lines.append("  (none: NCCL uses its defaults)")
    for row in report.effective:
        extra = f"  [overrides {row['overrides']}]" if row.get("overrides") else ""
        lines.append(f"  {row['name']}={row['value']}  ({row['source']}){extra}")
    lines.append("")
    if report.problems:
        lines.append("Problems")
        lines += [f"  ✗ {p}" for p in report.problems]
    else:
        lines.append("No problems found.")
    return "\n".join(lines)

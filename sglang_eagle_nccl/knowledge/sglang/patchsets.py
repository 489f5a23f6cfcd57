"""Patch manifests: reading them, choosing one for an SGLang version, checking their targets.

The manifests (top-level ``patches/*.toml`` in the repository, ``sglang_eagle_nccl/patches``
inside the wheel) are data. Everything here is pure or reads files only: targets are checked
by parsing SGLang's source with :mod:`ast`, never by importing SGLang, so the same check runs
on a downloaded wheel (the compatibility matrix) and on the installed SGLang (``doctor``, and
the guard for SGLang releases newer than every manifest).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from sglang_eagle_nccl.contract import versions
from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.hook_target import TargetNames
from sglang_eagle_nccl.contract.versions import stands_for
from sglang_eagle_nccl.knowledge._toml import loads as toml_loads

HookKind = Literal["before", "after", "around"]
Mechanism = Literal["hook_registry", "wrapt"]
HOOK_KINDS = ("before", "after", "around")
MECHANISMS = ("hook_registry", "wrapt")
RELIANCE_KINDS = ("writes", "reaches", "precedes")


class ManifestError(ValueError):
    """A patch manifest is malformed (a bug in the shipped data, caught by the tests)."""


class PatchSetError(PluginStop, RuntimeError):
    """The installed SGLang cannot be served: unsupported version or required targets missing."""

    def __init__(self, message: str, missing: Sequence[TargetCheck] = ()):
        super().__init__(message)
        self.missing = tuple(missing)


@dataclass(frozen=True)
class Reliance:
    """One behaviour of SGLang a hook relies on, stated so that the compatibility matrix can prove it.

    ``writes``: these environment variables are written inside the call (through SGLang's own
    calls); ``reaches``: this function or class is called inside the call; ``precedes``: as
    ``reaches``, for a hook that must run before it (``before`` / ``around`` only). ``start`` is
    the function the search starts from (default: the hook's target), for a hook whose point is
    that SGLang calls it from somewhere (``get_torch_distributed_pg_options`` from
    ``GroupCoordinator.__init__``). ``versions`` narrows the releases it is claimed for.

    ``reaches`` / ``precedes`` name one definition (``module:Qualified.name`` in SGLang, or a
    third-party dotted name such as ``torch.distributed.new_group``), never a bare name. ``when``
    lists the conditions under which the behaviour is claimed (a test's source text, or ``--flag``
    for a server flag the plugin checks at run time); ``callbacks`` names SGLang helpers that call
    the function passed to them. :mod:`~sglang_eagle_nccl.knowledge.sglang.proof` says what holds.
    """

    kind: Literal["writes", "reaches", "precedes"]
    subject: tuple[str, ...]  # variables for writes; one definition for reaches / precedes
    why: str
    start: str | None = None
    versions: str | None = None
    when: tuple[str, ...] = ()
    callbacks: tuple[str, ...] = ()

    def applies_to(self, version: Version) -> bool:
        return self.versions is None or versions.in_range(self.versions, version)

    def describe(self) -> str:
        what = {"writes": "writes", "reaches": "reaches", "precedes": "precedes"}[self.kind]
        return (f"{what} {', '.join(self.subject)}" + (f" (from {self.start})" if self.start else "")
                + (f" when {' and '.join(self.when)}" if self.when else ""))

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "subject": list(self.subject), "why": self.why, "from": self.start,
                "versions": self.versions, "when": list(self.when), "callbacks": list(self.callbacks)}


@dataclass(frozen=True)
class Hook(TargetNames):
    target: str  # "package.module:Qualified.name"
    kind: HookKind
    handler: str
    required: bool
    params: tuple[str, ...] = ()
    versions: str | None = None
    when: Literal["always", "cli", "ledger"] = "always"
    mechanism: Mechanism | None = None
    process: str = ""
    relies_on: tuple[Reliance, ...] = ()

    def applies_to(self, version: Version) -> bool:
        # Judged by the release the version stands for, like the patch set itself: a hook gated
        # ">=0.5.11,<0.5.13" applies to 0.5.11rc1 and not to 0.5.13rc1.
        return self.versions is None or versions.in_range(self.versions, version)

    def to_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "kind": self.kind,
            "handler": self.handler,
            "required": self.required,
            "params": list(self.params),
            "versions": self.versions,
            "when": self.when,
            "mechanism": self.mechanism,
        }


@dataclass(frozen=True)
class PatchSet:
    id: str
    title: str
    versions: str
    tested_through: str
    mechanism: Mechanism
    # The exact releases the compatibility matrix checked (written by ci/matrix.py from ci/versions.toml).
    tested: tuple[str, ...]
    hooks: tuple[Hook, ...]
    sglang_writes: tuple[str, ...] = ()
    # (server flag, NCCL variables SGLang writes for correctness while the flag is on)
    correctness_writes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    notes: str = ""
    path: str = ""

    def contains(self, version: Version) -> bool:
        """True when ``version`` (a pre-release, dev build or local build counts as its release) is in range."""
        return versions.in_range(self.versions, version)

    def hooks_for(self, version: Version, *, cli: bool | None = None) -> list[Hook]:
        hooks = [h for h in self.hooks if h.applies_to(version)]
        if cli is not None:
            hooks = [h for h in hooks if cli or h.when != "cli"]
        return hooks

    def mechanism_of(self, hook: Hook) -> Mechanism:
        return hook.mechanism or self.mechanism


def _manifest_dir() -> Path:
    # Inside an installed wheel the manifests sit in the package; in a source checkout they are
    # the repository's top-level patches/ folder.
    packaged = resources.files("sglang_eagle_nccl").joinpath("patches")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "patches"


def parse_manifest(text: str, path: str = "<manifest>") -> PatchSet:
    doc = toml_loads(text)
    try:
        head = doc["patch_set"]
        hooks_raw = doc.get("hook", [])
        unknown = set(doc) - {"patch_set", "hook"}
        if unknown:
            raise ManifestError(f"{path}: unknown sections {sorted(unknown)}")
        SpecifierSet(head["versions"])
        tested = _tested_releases(head, path)
        if head["mechanism"] not in MECHANISMS:
            raise ManifestError(f"{path}: mechanism must be one of {MECHANISMS}")
        hooks = []
        for h in hooks_raw:
            extra = set(h) - {"target", "kind", "handler", "required", "params", "versions", "when", "mechanism", "process",
                              "relies_on"}
            if extra:
                raise ManifestError(f"{path}: hook {h.get('target')} has unknown keys {sorted(extra)}")
            if ":" not in h["target"]:
                raise ManifestError(f"{path}: target {h['target']!r} must be 'module:qualname'")
            if h["kind"] not in HOOK_KINDS:
                raise ManifestError(f"{path}: hook kind {h['kind']!r} not in {HOOK_KINDS}")
            if h.get("versions"):
                SpecifierSet(h["versions"])
            if h.get("mechanism") not in (None, *MECHANISMS):
                raise ManifestError(f"{path}: hook mechanism {h['mechanism']!r}")
            hooks.append(
                Hook(
                    target=h["target"],
                    kind=h["kind"],
                    handler=h["handler"],
                    required=bool(h["required"]),
                    params=tuple(h.get("params", ())),
                    versions=h.get("versions"),
                    when=h.get("when", "always"),
                    mechanism=h.get("mechanism"),
                    process=h.get("process", ""),
                    relies_on=_reliances(h, path),
                )
            )
        return PatchSet(
            id=head["id"],
            title=head["title"],
            versions=head["versions"],
            tested_through=head["tested_through"],
            mechanism=head["mechanism"],
            tested=tested,
            hooks=tuple(hooks),
            sglang_writes=tuple(head.get("sglang_writes", ())),
            correctness_writes=tuple(sorted((str(k), tuple(v)) for k, v in head.get("correctness_writes", {}).items())),
            notes=head.get("notes", ""),
            path=path,
        )
    except KeyError as exc:
        raise ManifestError(f"{path}: missing key {exc}") from None
    except (InvalidSpecifier, InvalidVersion) as exc:
        raise ManifestError(f"{path}: {exc}") from None


def _tested_releases(head: dict[str, Any], path: str) -> tuple[str, ...]:
    """``tested``: published releases, each in the set's range, in order, the newest being ``tested_through``."""
    raw = head.get("tested")
    if not isinstance(raw, list) or not raw or not all(isinstance(t, str) for t in raw):
        raise ManifestError(f"{path}: tested must be a non-empty list of the releases the matrix checked "
                            "(written by `python ci/matrix.py --sync`)")
    parsed = [Version(t) for t in raw]
    for text, v in zip(raw, parsed, strict=True):
        if str(v) != text or v.is_prerelease or v.is_devrelease or v.local is not None:
            raise ManifestError(f"{path}: tested release {text!r} must be a published release in normal form ({v})")
        if not versions.contains(head["versions"], v):
            raise ManifestError(f"{path}: tested release {text} is outside the set's versions {head['versions']!r}")
    if parsed != sorted(set(parsed)):
        raise ManifestError(f"{path}: tested releases must be in ascending order without repeats")
    if Version(head["tested_through"]) != parsed[-1]:
        raise ManifestError(f"{path}: tested_through = {head['tested_through']!r} but the newest tested release is {raw[-1]}")
    return tuple(raw)


def _reliances(hook: dict[str, Any], path: str) -> tuple[Reliance, ...]:
    """``relies_on``: what the hook needs SGLang to do inside (or from) the target; SGLang targets must state it."""
    raw = hook.get("relies_on", [])
    target = hook["target"]
    is_sglang = target.split(":", 1)[0].split(".")[0] == "sglang"
    # Every SGLang hook states what it relies on, the phase ledger's opt-in observation hooks included: a
    # hook whose behaviour is not proven would count nothing on a release where it moved, silently.
    if not isinstance(raw, list) or (is_sglang and not raw):
        raise ManifestError(f"{path}: hook {target} must state relies_on = [{{ writes|reaches|precedes = ..., why = ... }}]: "
                            "the behaviour of SGLang it needs, which the compatibility matrix proves on every release")
    out = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise ManifestError(f"{path}: hook {target}: each relies_on entry is a table")
        kinds = [k for k in RELIANCE_KINDS if k in entry]
        extra = set(entry) - {*RELIANCE_KINDS, "why", "from", "versions", "when", "callbacks"}
        if len(kinds) != 1 or extra:
            raise ManifestError(f"{path}: hook {target}: a relies_on entry has exactly one of {RELIANCE_KINDS}, a why, and "
                                f"optionally from / versions (got {sorted(entry)})")
        kind = kinds[0]
        value = entry[kind]
        subject = tuple(value) if kind == "writes" else (value,)
        if not subject or not all(isinstance(x, str) and x for x in subject):
            raise ManifestError(f"{path}: hook {target}: {kind} must name {'variables' if kind == 'writes' else 'a callable'}")
        if kind == "precedes" and hook["kind"] == "after":
            raise ManifestError(f"{path}: hook {target}: an after hook cannot precede {value}; use reaches")
        if not isinstance(entry.get("why"), str) or not entry["why"].strip():
            raise ManifestError(f"{path}: hook {target}: relies_on {kind} {value!r} needs a why (in SGLang's terms)")
        if entry.get("versions"):
            SpecifierSet(entry["versions"])
        if kind != "writes" and ":" not in value and "." not in value:
            raise ManifestError(f"{path}: hook {target}: {kind} {value!r} must name a definition ('module:Qualified.name' "
                                "in SGLang, or a third-party dotted name such as torch.distributed.new_group), not a bare "
                                "name that any namesake would match")
        when = _string_list(entry, "when", path, target)
        for condition in when:
            if not condition.startswith("--"):
                try:
                    compile(condition, "<when>", "eval")
                except SyntaxError:
                    raise ManifestError(f"{path}: hook {target}: when {condition!r} is neither a --flag nor a Python "
                                        "expression (the source text of SGLang's test)") from None
        callbacks = _string_list(entry, "callbacks", path, target)
        if any(":" not in c for c in callbacks):
            raise ManifestError(f"{path}: hook {target}: callbacks name SGLang functions as 'module:Qualified.name'")
        start = entry.get("from")
        if start is not None and (not isinstance(start, str) or ":" not in start):
            raise ManifestError(f"{path}: hook {target}: from must be 'module:Qualified.name'")
        out.append(Reliance(kind, subject, entry["why"].strip(), start, entry.get("versions"), when, callbacks))
    return tuple(out)


def _string_list(entry: dict[str, Any], key: str, path: str, target: str) -> tuple[str, ...]:
    raw = entry.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(x, str) and x.strip() for x in raw):
        raise ManifestError(f"{path}: hook {target}: {key} must be a list of non-empty strings")
    return tuple(x.strip() for x in raw)


@functools.cache
def load_manifests(directory: str | None = None) -> tuple[PatchSet, ...]:
    folder = Path(directory) if directory else _manifest_dir()
    sets = [parse_manifest(p.read_text("utf-8"), str(p)) for p in sorted(folder.glob("*.toml"))]
    return tuple(sorted(sets, key=lambda s: Version(s.tested_through)))


# --- selection -----------------------------------------------------------------------------------

# tested: this exact release (a local label dropped) is one of the set's ``tested`` releases, whose
# published wheel the compatibility matrix checked; untested_newer: a release (or post release)
# newer than every release the set was checked on; untested_prerelease: a pre-release or dev
# build, whose code may differ from the release it precedes; untested_unchecked: inside the set's
# range but never checked (never published, such as 0.5.0, or not added to the matrix). Every
# untested status makes the caller check every required target in the installed source.
Status = Literal["tested", "untested_newer", "untested_prerelease", "untested_unchecked"]


@dataclass(frozen=True)
class Selection:
    version: str
    patch_set: PatchSet
    status: Status

    @property
    def tested(self) -> bool:
        return self.status == "tested"

    @property
    def why_untested(self) -> str:
        """One sentence for logs and errors; empty when tested."""
        ps = self.patch_set
        if self.status == "untested_newer":
            return f"SGLang {self.version} is newer than the releases patch set {ps.id} was proven on (through {ps.tested_through})"
        if self.status == "untested_prerelease":
            return (
                f"SGLang {self.version} is a pre-release or development build of {stands_for(self.version)}; "
                f"patch set {ps.id} was proven on releases only"
            )
        if self.status == "untested_unchecked":
            return (
                f"SGLang {self.version} is not one of the {len(ps.tested)} releases patch set {ps.id} was checked on "
                f"({ps.tested[0]} ... {ps.tested_through}; it may never have been published, or is missing from the "
                "compatibility matrix)"
            )
        return ""


def parse_sglang_version(version: str) -> Version:
    try:
        return versions.parse(version)
    except (InvalidVersion, TypeError):
        raise PatchSetError(
            f"installed SGLang reports version {str(version)[:64]!r}, which is not a PEP 440 version; "
            "sglang-eagle-nccl cannot tell which patch set applies. Reinstall SGLang from a release."
        ) from None


def select(version: str, sets: Sequence[PatchSet] | None = None) -> Selection:
    """Pick the patch set for ``version`` (pre/post/dev/local versions handled).

    A pre-release or dev build selects the set of the release it precedes (``0.5.11rc1`` the
    0.5.11 set), marked ``untested_prerelease``; a version newer than everything a set was proven
    against (``tested_through``; a local tag such as ``0.5.23+cu130`` counts as 0.5.23, a post
    release as newer) selects that set, marked ``untested_newer``; a release inside the range
    that the matrix never checked (``0.5.0``) is ``untested_unchecked``. For any of these, the
    caller must check the required targets in the installed source before patching. A
    pre-release of the oldest supported release (``0.4.3rc1``) is older than every supported
    release and refused.
    """
    sets = load_manifests() if sets is None else sets
    v = parse_sglang_version(version)
    release = stands_for(v)
    oldest = min(sets, key=lambda s: Version(s.tested_through))
    for ps in sets:
        if not ps.contains(v):
            continue
        if ps is oldest and not versions.contains(ps.versions, v):
            # Precedes the first release this plugin supports: nothing was ever checked there.
            break
        if release > Version(ps.tested_through):
            status: Status = "untested_newer"
        elif v.is_prerelease or v.is_devrelease:
            status = "untested_prerelease"
        elif str(versions.public(v)) not in ps.tested:
            status = "untested_unchecked"
        else:
            status = "tested"
        return Selection(version, ps, status)
    precedes = f", a pre-release or development build of {release}," if release != v and release.post is None else ""
    raise PatchSetError(
        f"SGLang {version}{precedes} is older than every supported release (supported: "
        f"{', '.join(s.versions for s in sets)}); upgrade SGLang to >= 0.4.3 "
        f"(oldest patch set: {oldest.id})."
    )


# --- checking targets against source ------------------------------------------------------------


@dataclass(frozen=True)
class TargetCheck:
    target: str
    found: bool
    reason: str = ""
    signature: tuple[str, ...] = ()
    missing_params: tuple[str, ...] = ()
    file: str | None = None
    line: int | None = None
    unproven: str = ""  # the target exists, but a behaviour its hook states is not proven in this source

    @property
    def ok(self) -> bool:
        return self.found and not self.missing_params and not self.unproven

    def to_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "ok": self.ok,
            "found": self.found,
            "reason": self.reason,
            "signature": list(self.signature),
            "missing_params": list(self.missing_params),
            "file": self.file,
            "line": self.line,
            **({"unproven": self.unproven} if self.unproven else {}),
        }


def _params_of(node: Any) -> tuple[str, ...]:
    a = node.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if a.vararg:
        names.append("*" + a.vararg.arg)
    if a.kwarg:
        names.append("**" + a.kwarg.arg)
    return tuple(names)


def _find_in_body(body: Iterable[Any], name: str, *, want_class: bool = False) -> Any:
    """The definition of ``name`` in a module/class body; the last one wins, as at run time.

    With ``want_class`` the last ``class`` statement is returned even when the name is later
    rebound by assignment: SGLang >= 0.5.20 writes ``ServerArgs = msgspec.defstruct(...,
    namespace=vars(ServerArgs))``, which keeps every method of the class statement.
    """
    import ast

    found = None
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            if not want_class or isinstance(node, ast.ClassDef):
                found = node
        elif isinstance(node, ast.If):
            # Definitions under `if TYPE_CHECKING` / platform branches still exist in some branch.
            inner = _find_in_body(node.body, name, want_class=want_class) or _find_in_body(
                node.orelse, name, want_class=want_class
            )
            found = inner or found
        elif not want_class and isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found = node
    return found


def check_source(source: str, target: str, params: Sequence[str], file: str | None = None, *,
                 parse: Callable[[str], Any] | None = None) -> TargetCheck:
    """Does ``module_source`` define the ``qualname`` part of ``target`` with ``params``?

    ``parse`` turns the source into its ``ast.Module`` (``ast.parse``; the compatibility matrix passes
    the module its call graph already parsed, since parsing is most of its time)."""
    import ast

    qualname = target.split(":", 1)[1]
    try:
        tree = (parse or ast.parse)(source)
    except SyntaxError as exc:
        return TargetCheck(target, False, f"source does not parse: {exc}", file=file)
    body: Iterable[Any] = tree.body
    node: Any = None
    parts = qualname.split(".")
    for index, part in enumerate(parts):
        node = _find_in_body(body, part, want_class=index < len(parts) - 1)
        if node is None:
            return TargetCheck(target, False, f"{part!r} not defined", file=file)
        body = node.body if isinstance(node, ast.ClassDef) else []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        sig = _params_of(node)
        accepts_kwargs = any(p.startswith("**") for p in sig)
        missing = tuple(p for p in params if p not in sig and not accepts_kwargs)
        return TargetCheck(
            target, True, "" if not missing else f"parameters {list(missing)} not in signature",
            sig, missing, file, node.lineno,
        )
    if isinstance(node, ast.ClassDef):
        return TargetCheck(target, False, "is a class; hooks need a function or method", file=file, line=node.lineno)
    # An assignment (e.g. `X = other_function`): exists, signature unknown.
    return TargetCheck(target, True, "defined by assignment; signature not checked", file=file, line=getattr(node, "lineno", None))


def module_candidates(module: str) -> tuple[str, str]:
    """Relative paths (``/``-separated) where ``module``'s source may live."""
    base = "/".join(module.split("."))
    return (base + ".py", base + "/__init__.py")


def check_hook_with_reader(read: Callable[[str], str | None], hook: Hook, *,
                           parse: Callable[[str], Any] | None = None) -> TargetCheck:
    """Check ``hook`` against sources obtained through ``read(relative_path)`` (a directory or a wheel)."""
    for rel in module_candidates(hook.module):
        text = read(rel)
        if text is not None:
            return check_source(text, hook.target, hook.params, rel, parse=parse)
    return TargetCheck(hook.target, False, f"module {hook.module} not found")


def directory_reader(root: Path) -> Callable[[str], str | None]:
    def read(rel: str) -> str | None:
        path = root / rel
        return path.read_text("utf-8", errors="replace") if path.is_file() else None

    return read


def check_target_in_tree(root: Path, hook: Hook) -> TargetCheck:
    return check_hook_with_reader(directory_reader(root), hook)


def installed_root(package: str = "sglang") -> Path | None:
    """site-packages directory holding ``package``, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]).parent


@dataclass(frozen=True)
class Coverage:
    """Which hooks of a selection can be installed in this SGLang."""

    selection: Selection
    checks: tuple[tuple[Hook, TargetCheck], ...] = field(default_factory=tuple)
    # {target: [proof dicts]} of the stated behaviours (installed_proof); None when not proven in this process
    proofs: dict[str, list[dict[str, Any]]] | None = None

    @property
    def missing_required(self) -> list[TargetCheck]:
        return [c for h, c in self.checks if h.required and not c.ok]

    @property
    def missing_optional(self) -> list[TargetCheck]:
        return [c for h, c in self.checks if not h.required and not c.ok]


def check_coverage(selection: Selection, root: Path, *, cli: bool = True, prove: bool = False,
                   compute: bool | None = None) -> Coverage:
    """Each hook target in the installed source; with ``prove``, also each hook's stated behaviour.

    A target whose behaviour is not proven (:mod:`.proof`: resolved definitions, stated conditions)
    counts as not covered, like a missing one: refused, or marked uncovered under allow_partial.
    """
    v = Version(selection.version)
    checks = []
    for hook in selection.patch_set.hooks_for(v, cli=cli):
        if not hook.is_sglang:
            continue  # third-party targets (setproctitle) are checked when they are patched
        checks.append((hook, check_target_in_tree(root, hook)))
    if not prove:
        return Coverage(selection, tuple(checks))
    from dataclasses import replace

    from sglang_eagle_nccl.knowledge.sglang import installed_proof

    # The index's patch set (start-up) carries no relies_on: the manifest itself states them.
    stated = next((s for s in load_manifests() if s.id == selection.patch_set.id), selection.patch_set)
    proofs = installed_proof.prove_installed(stated, selection.version, root, cli=cli, compute=compute)
    failed = installed_proof.unproven(proofs or {})
    checks = [(h, replace(c, unproven=failed[h.target], reason=c.reason or f"behaviour not proven: {failed[h.target]}")
               if c.ok and h.target in failed else c) for h, c in checks]
    return Coverage(selection, tuple(checks), proofs)


def require_coverage(coverage: Coverage, *, allow_partial: bool) -> None:
    """Refuse an untested SGLang whose required targets moved, unless partial coverage is allowed."""
    missing = coverage.missing_required
    if not missing or allow_partial:
        return
    sel = coverage.selection
    lines = [f"{sel.why_untested}, and {len(missing)} required hook target(s) are missing:"]
    lines += [f"  - {c.target}: {c.reason}" for c in missing]
    lines.append(
        "The NCCL profile would not reach every process/communicator. Upgrade sglang-eagle-nccl, or run "
        "anyway with --allow-partial / SGLANG_EAGLE_NCCL_ALLOW_PARTIAL=1 (the audit marks what is uncovered)."
    )
    raise PatchSetError("\n".join(lines), missing)

"""The one wire format that carries a resolved profile to child processes, and its one decoder.

A launcher resolves and validates a profile once and hands it to every process it starts in one
environment variable, ``SGLANG_EAGLE_NCCL_PROFILE``::

    sen3.<hex of a JSON object's UTF-8>.<HMAC-SHA256 of that hex text, hex>

The JSON object holds the profile (``env``, ``groups``, ``nodes``, ``policy``, ``tuner_rules`` ...),
the ``SGLANG_EAGLE_NCCL*`` inputs it was resolved from (as the children inherit them, after the
launcher's own writes) and the launch directory, if one was opened.

Why hex: the value goes through shells, systemd ``EnvironmentFile=``, ``docker --env-file``,
Kubernetes manifests and Ray's runtime env unchanged, because it holds no quote, space, ``$`` or
backslash. Hex rather than base64 (``sen2``, a third shorter): ``bytes.hex``/``bytes.fromhex`` are
built in, while ``binascii`` is a shared library whose loading cost 0.6 ms of every SGLang
child's start (the wire is ~1.4 KB for a built-in profile; the limit is far above).

Why a keyed digest: reading a profile back must never apply values nobody validated
(``NCCL_BUFFSIZE=4M``, a newline ...). Validating every value again costs ~120 ms at interpreter
start (the NCCL knowledge base, ``packaging``, ``dataclasses``), in every process SGLang spawns.
So a validating process signs what it wrote with a per-user secret (a 0600 file in the user's
cache directory, never in the environment); a reader holding the same secret knows the text is
exactly what a validating process of this user wrote and skips the value checks. Anything else —
no key on this machine (a Ray worker elsewhere), a hand-edited value, a stale value from another
user — goes through the same checks as :func:`~sglang_eagle_nccl.profile.resolve.resolve` (the ``validate`` the caller passes).

Kept free of heavy imports: the trusted path runs at interpreter start in every child process.
"""

import os

from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.contract.jsonlight import JSONLightError, dumps, loads

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Mapping
    from typing import Any

    from sglang_eagle_nccl.contract.findings import (
        ProfileError,  # imported where raised: findings builds dataclasses
    )

WIRE_PREFIX = "sen3"
# Environment values are read by every process at start; a profile is a short document.
MAX_WIRE_CHARS = 256 * 1024
KEY_FILE = "handoff.key"
KEY_BYTES = 32
_PROFILE_KEYS = ("name", "description", "env", "groups", "nodes", "policy", "sources", "tuner_rules")


class Decoded:
    """What :func:`decode` read: the profile as plain data, and whether values were checked here."""

    __slots__ = ("data", "inputs", "run_dir", "trusted", "profile")

    def __init__(self, data: "dict[str, Any]", inputs: dict[str, str], run_dir: str | None, trusted: bool,
                 profile: "Any") -> None:
        self.data = data
        self.inputs = inputs
        self.run_dir = run_dir
        # True: the digest proves a validating process of this user wrote it (values not re-checked).
        # False: every value went through the same checks as resolve(); ``profile`` is that result.
        self.trusted = trusted
        self.profile = profile


# --- the hand-off key ---------------------------------------------------------------------------


def key_path() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sglang-eagle-nccl", KEY_FILE)


def _private(st: "Any") -> bool:
    import stat

    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def read_key() -> bytes | None:
    """The per-user hand-off key, or None when there is none this process may trust."""
    path = key_path()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not _private(os.fstat(fd)):
            return None  # someone else could have written it: never trust it
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    return key if len(key) == KEY_BYTES else None


def ensure_key() -> bytes | None:
    """Read the key, creating it (0600, atomically) if this user has none yet. None when impossible.

    Only validating processes call this. Without a key every reader re-validates, which is
    slower but just as correct, so every failure here is silent.
    """
    key = read_key()
    if key is not None:
        return key
    path = key_path()
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        st = os.lstat(directory)
        import stat

        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            return None
        tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, os.urandom(KEY_BYTES))
        finally:
            os.close(fd)
        try:
            # link() fails if another process created the key meanwhile: theirs wins, both read it.
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    except OSError:
        return None
    return read_key()


def _sha256() -> "Any":
    # The C module directly: hashlib imports OpenSSL's bindings (~7 ms at interpreter start).
    try:
        from _sha256 import sha256  # Python <= 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # Python >= 3.12
        except ImportError:  # pragma: no cover - exotic builds
            from hashlib import sha256
    return sha256


def digest(key: bytes, text: str) -> str:
    """HMAC-SHA256 (RFC 2104) of ``text`` under ``key``, hex."""
    sha256 = _sha256()
    block = key.ljust(64, b"\0")
    inner = sha256(bytes(b ^ 0x36 for b in block) + text.encode("ascii")).digest()
    return sha256(bytes(b ^ 0x5C for b in block) + inner).hexdigest()


def _equal(a: str, b: str) -> bool:
    # Constant time (the digest is compared with text anyone can set); hmac.compare_digest is this
    # same C function, without importing hashlib.
    from _operator import _compare_digest

    return _compare_digest(a.encode("ascii"), b.encode("ascii"))


# --- inputs -------------------------------------------------------------------------------------


def current_inputs(environ: "Mapping[str, str]") -> dict[str, str]:
    """The ``SGLANG_EAGLE_NCCL*`` variables a profile is resolved from, as set in ``environ``."""
    return {k: environ[k] for k in names.INPUT_VARS if k in environ}


def input_disagreements(recorded: "Mapping[str, str]", environ: "Mapping[str, str]") -> list[tuple[str, str | None, str | None]]:
    """``(variable, value now, value recorded)`` for every input that changed since the hand-off."""
    now = current_inputs(environ)
    return [(k, now.get(k), recorded.get(k)) for k in names.INPUT_VARS if now.get(k) != recorded.get(k)]


# --- encode / decode ----------------------------------------------------------------------------


_HEX_CHARS = frozenset("0123456789abcdef")


def _hex_decode(text: str) -> bytes:
    # bytes.fromhex skips whitespace and takes upper case: only the encoder's own form is accepted.
    if not _HEX_CHARS.issuperset(text) or len(text) % 2:
        raise ValueError("not lower-case hex")
    return bytes.fromhex(text)


def encode(profile_data: "Mapping[str, Any]", *, inputs: "Mapping[str, str]", run_dir: str | None,
           key: bytes | None = None) -> str:
    """The ``SGLANG_EAGLE_NCCL_PROFILE`` value for a validated profile (``Profile.to_dict()``).

    Only processes that validated ``profile_data`` call this; they sign it with the hand-off key.
    """
    body = {
        "v": 2,
        "profile": {k: profile_data[k] for k in _PROFILE_KEYS if k in profile_data},
        "inputs": dict(inputs),
        "run_dir": run_dir,
    }
    payload = dumps(body).encode("utf-8").hex()
    # key None: this user's key, created if need be; b"" (or no key possible): unsigned, so readers
    # run every check themselves.
    key = ensure_key() if key is None else key
    return f"{WIRE_PREFIX}.{payload}.{digest(key, payload) if key else '-'}"


# Both variables, always together: `sglang-eagle-nccl env --audit-dir` also writes the launch's root
# marker, and a marker left without its serialised profile made the next launch a child of no launch
# (no launch directory: its audit silently off). The activation now ignores such a lone marker too.
_AND_ROOT = f" and {names.ENV_ROOT_PID}"


def _malformed(why: str) -> "ProfileError":
    from sglang_eagle_nccl.contract.findings import ProfileError, error

    return ProfileError([
        error(
            names.ENV_PROFILE, None,
            f"the serialised profile is malformed: {why}",
            f"unset {names.ENV_PROFILE}{_AND_ROOT}; sglang-eagle-nccl writes it for the processes it starts "
            "(`sglang-eagle-nccl env` prints a fresh one)",
        )
    ])


def _split(text: str) -> tuple[str, str]:
    if not isinstance(text, str) or len(text) > MAX_WIRE_CHARS:
        raise _malformed(f"longer than {MAX_WIRE_CHARS} characters")
    parts = text.strip().split(".")
    if len(parts) != 3 or parts[0] != WIRE_PREFIX:
        raise _malformed(f"expected '{WIRE_PREFIX}.<data>.<digest>' (written by a different plugin version?)")
    payload, mac = parts[1], parts[2]
    if not payload.isascii() or not mac.isascii():
        raise _malformed("non-ASCII characters")
    return payload, mac


def _structure(body: "Any") -> "tuple[dict[str, Any], dict[str, str], str | None]":
    """Shape checks every reader runs, trusted or not (cheap: types, names, one-line strings)."""
    if not isinstance(body, dict) or body.get("v") != 2 or set(body) - {"v", "profile", "inputs", "run_dir"}:
        raise _malformed("not a version-2 hand-off object")
    data, inputs, run_dir = body.get("profile"), body.get("inputs"), body.get("run_dir")
    if not isinstance(data, dict) or set(data) - set(_PROFILE_KEYS):
        raise _malformed("the profile part is not an object of known keys")
    if not isinstance(inputs, dict) or not all(k in names.INPUT_VARS and isinstance(v, str) for k, v in inputs.items()):
        raise _malformed("the recorded inputs are not SGLANG_EAGLE_NCCL* strings")
    if run_dir is not None and not (isinstance(run_dir, str) and run_dir.startswith("/") and "\n" not in run_dir):
        raise _malformed("the launch directory is not an absolute path")
    sections = [data.get("env", {}), *_values(data.get("groups", {})), *_values(data.get("nodes", {}))]
    for section in sections:
        if not isinstance(section, dict):
            raise _malformed("env, groups and nodes must map names to values")
        for k, v in section.items():
            if not names.is_allowed_name(k):
                raise _malformed(f"{k!r} is not an NCCL_* / TORCH_NCCL_* name")
            if not isinstance(v, str) or "\n" in v or "\0" in v:
                raise _malformed(f"{k} is not a one-line string")
    if not isinstance(data.get("policy", {}), dict) or not isinstance(data.get("name", ""), str):
        raise _malformed("policy must be an object and name a string")
    return data, dict(inputs), run_dir


def _values(obj: "Any") -> "list[Any]":
    if not isinstance(obj, dict):
        raise _malformed("groups and nodes must be objects")
    return list(obj.values())


def decode(text: str, environ: "Mapping[str, str] | None" = None, *, validate: "Callable[[dict[str, Any]], Any]",
           check_inputs: bool = True) -> "Decoded":
    """Read ``SGLANG_EAGLE_NCCL_PROFILE``; raise :class:`ProfileError` on anything unusable.

    ``validate`` runs every check :func:`~sglang_eagle_nccl.profile.resolve.resolve` runs on a
    profile that no validating process of this user provably wrote (no key here, no digest, a
    hand-edited value); it is required, so no caller can read an unchecked profile by forgetting
    it (``profile.resolve.decode_handoff`` passes the usual one).

    With ``check_inputs``, the ``SGLANG_EAGLE_NCCL*`` inputs of ``environ`` must equal those the
    profile was resolved from: a different ``SGLANG_EAGLE_NCCL`` in the same shell means the
    serialised profile is stale, and using it silently would apply a profile nobody asked for.
    """
    environ = os.environ if environ is None else environ
    payload, mac = _split(text)
    try:
        body = loads(_hex_decode(payload).decode("utf-8"))
    except (ValueError, JSONLightError, UnicodeDecodeError, RecursionError):
        raise _malformed("the data part is not hex of a JSON object") from None
    data, inputs, run_dir = _structure(body)
    if check_inputs:
        stale = input_disagreements(inputs, environ)
        if stale:
            raise _stale(stale)
    key = read_key()
    if key is not None and mac != "-" and _equal(digest(key, payload), mac):
        return Decoded(data, inputs, run_dir, True, None)
    # Not provably written by a validating process: the same checks as resolve(), all of them.
    profile = validate(data)
    return Decoded(profile.to_dict(), inputs, run_dir, False, profile)


def _stale(stale: list[tuple[str, str | None, str | None]]) -> "ProfileError":
    from sglang_eagle_nccl.contract.findings import ProfileError, error

    findings = []
    for var, now, recorded in stale:
        shown_now = "unset" if now is None else repr(now)
        shown_then = "unset" if recorded is None else repr(recorded)
        findings.append(
            error(
                var, now,
                f"{var} is {shown_now} here but was {shown_then} when the serialised profile in "
                f"{names.ENV_PROFILE} was resolved: that profile is stale, and applying it would ignore {var}",
                f"unset {names.ENV_PROFILE}{_AND_ROOT} so the plugin resolves {var} afresh (or unset {var}, or "
                "print a fresh environment with `sglang-eagle-nccl env`)",
            )
        )
    return ProfileError(findings)

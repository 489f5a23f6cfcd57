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
# The hand-off is one environment entry of every process a launch starts, so Linux's limit on one
# ``NAME=value`` entry (MAX_ARG_STRLEN, its NUL included) bounds it: a longer one makes every
# spawn fail with E2BIG. The hex doubles the JSON, so a profile of about 64 KiB of values reaches
# it. The encoder refuses to write one (:func:`encode`), the decoder to read one.
MAX_WIRE_CHARS = names.MAX_ARG_STRLEN - len(names.ENV_PROFILE) - 2
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


def _absolute(value: str | None) -> str | None:
    # The XDG Base Directory spec: an empty value counts as unset, and "all paths set in these
    # environment variables must be absolute ... [a relative one] should be considered invalid and
    # ignored". Without this an empty HOME put the key at /.cache and a relative one under
    # whatever directory the process happened to start in.
    return value if value and value.startswith("/") else None


def _passwd_home() -> str | None:
    # Only when HOME is unset, empty or relative (rare: never on the interpreter-start fast path).
    try:
        import pwd

        return _absolute(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError, OSError):
        return None


def key_path() -> str | None:
    """Where this user's hand-off key lives; None when no absolute cache directory is known.

    ``$XDG_CACHE_HOME`` if absolute, else ``$HOME/.cache`` if ``HOME`` is absolute, else the
    passwd entry's home ``/.cache``. None means no key: every reader then re-validates, which is
    correct, only slower.
    """
    base = _absolute(os.environ.get("XDG_CACHE_HOME"))
    if base is None:
        home = _absolute(os.environ.get("HOME")) or _passwd_home()
        if home is None:
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "sglang-eagle-nccl", KEY_FILE)


def _private(st: "Any") -> bool:
    import stat

    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def read_key() -> bytes | None:
    """The per-user hand-off key, or None when there is none this process may trust.

    Every gated interpreter (``pip`` included) may come here, so nothing planted at the key path
    can make it wait: ``O_NONBLOCK`` opens a FIFO at once instead of blocking until a writer
    appears, ``O_NOFOLLOW`` refuses a symlink, and ``fstat`` on the opened descriptor accepts only
    a regular file of this user that nobody else can read or write.
    """
    path = key_path()
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        if not _private(os.fstat(fd)):
            return None  # not a regular file, or someone else could have written it: never trust it
        key = os.read(fd, KEY_BYTES + 1)
    except OSError:
        return None
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
    if path is None:
        return None
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


BLOCK_BYTES = 64  # SHA-256's block size, B in RFC 2104


def digest(key: bytes, text: str) -> str:
    """HMAC-SHA256 (RFC 2104) of ``text`` under ``key``, hex: ``hmac.new(key, text, sha256)``.

    Written out because ``hmac`` imports ``hashlib`` (OpenSSL's bindings, ~7 ms at interpreter
    start); a unit test compares it with ``hmac`` for every key length from 0 to 200 bytes.
    """
    sha256 = _sha256()
    if len(key) > BLOCK_BYTES:
        key = sha256(key).digest()  # RFC 2104 section 2: a key longer than B is hashed first
    block = key.ljust(BLOCK_BYTES, b"\0")
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
    # Checked before the key is touched: a hand-off no process could be started with is never
    # written, and the launch fails here, naming the profile, instead of at every spawn.
    signed_chars = len(WIRE_PREFIX) + 1 + len(payload) + 1 + 64
    if signed_chars > MAX_WIRE_CHARS:
        raise _too_large(signed_chars, len(payload) // 2)
    # key None: this user's key, created if need be; b"" (or no key possible): unsigned, so readers
    # run every check themselves.
    key = ensure_key() if key is None else key
    return f"{WIRE_PREFIX}.{payload}.{digest(key, payload) if key else '-'}"


def _too_large(chars: int, json_bytes: int) -> "ProfileError":
    from sglang_eagle_nccl.contract.findings import ProfileError, error

    entry = len(names.ENV_PROFILE) + 1 + chars + 1
    return ProfileError([
        error(
            names.ENV_PROFILE, f"{chars} characters",
            f"the serialised profile every process of the launch inherits would take {entry} bytes as "
            f"{names.ENV_PROFILE}=<value> (hex of {json_bytes} bytes of JSON: twice the profile's size); Linux "
            f"refuses to start a process with any environment entry over MAX_ARG_STRLEN ({names.MAX_ARG_STRLEN} "
            "bytes), so every process SGLang starts would fail with 'Argument list too long'",
            f"shorten the profile to under about {MAX_WIRE_CHARS // 2 // 1024} KiB of values, node sections and "
            "rules (long values such as a topology belong in a file: NCCL_TOPO_FILE=/path)",
        )
    ])


# What a launcher writes for the processes it starts, besides the gate. A fix that unsets the
# serialised profile must unset the root marker with it: left alone, it makes the next launcher
# started from that shell believe it is a child, and a child opens no launch directory (its audit
# silently never happens).
_LAUNCHER_WRITTEN = f"{names.ENV_PROFILE} {names.ENV_ROOT_PID}"


def _malformed(why: str) -> "ProfileError":
    from sglang_eagle_nccl.contract.findings import ProfileError, error

    return ProfileError([
        error(
            names.ENV_PROFILE, None,
            f"the serialised profile is malformed: {why}",
            f"unset {_LAUNCHER_WRITTEN} (sglang-eagle-nccl writes both for the processes it starts; "
            "`sglang-eagle-nccl env` prints fresh ones)",
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
                f"unset {_LAUNCHER_WRITTEN} so the plugin resolves {var} afresh (or unset {var}, or print a "
                "fresh environment with `sglang-eagle-nccl env`)",
            )
        )
    return ProfileError(findings)

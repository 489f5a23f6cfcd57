"""Names: the plugin's own environment variables, and the one rule every writer obeys (only
``NCCL_*`` and ``TORCH_NCCL_*`` variables are ever set).

Kept free of imports: the ``.pth`` gate and every process of an enabled launch import it at
interpreter start.
"""

# Set by the user (or by the plugin for the processes SGLang spawns): a built-in profile name,
# a TOML file, or a bare "1"/"on" meaning "enabled with the other variables below".
ENV_ENABLE = "SGLANG_EAGLE_NCCL"
# The resolved profile in the one wire format (contract/handoff.py), written by the launcher for the
# processes it starts: they re-create exactly the same profile without re-reading files.
ENV_PROFILE = "SGLANG_EAGLE_NCCL_PROFILE"
# Extra KEY=VALUE settings (whitespace separated), like repeated --nccl-env flags.
ENV_ENV = "SGLANG_EAGLE_NCCL_ENV"
ENV_AUDIT_DIR = "SGLANG_EAGLE_NCCL_AUDIT_DIR"
ENV_ALLOW_PARTIAL = "SGLANG_EAGLE_NCCL_ALLOW_PARTIAL"
ENV_ALLOW_UNKNOWN = "SGLANG_EAGLE_NCCL_ALLOW_UNKNOWN"
ENV_AUDIT_REQUIRED = "SGLANG_EAGLE_NCCL_AUDIT_REQUIRED"
ENV_SGLANG_WINS = "SGLANG_EAGLE_NCCL_SGLANG_WINS"
ENV_NCCL_VERSION = "SGLANG_EAGLE_NCCL_NCCL_VERSION"
ENV_CONSISTENCY = "SGLANG_EAGLE_NCCL_CONSISTENCY"
ENV_CONSISTENCY_TIMEOUT = "SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT"
ENV_MECHANISM = "SGLANG_EAGLE_NCCL_MECHANISM"
# The phase ledger (contract/ledger.py): counts every collective by speculative phase when on.
ENV_LEDGER = "SGLANG_EAGLE_NCCL_LEDGER"
# Node rank of this launcher in a multi-node launch (selects [nodes.<rank>.env]).
ENV_NODE_RANK = "SGLANG_EAGLE_NCCL_NODE_RANK"

# Every variable a profile is resolved from. The serialised profile records their values so that a
# process whose inputs differ (a stale SGLANG_EAGLE_NCCL_PROFILE in a shell) refuses instead of
# silently applying the old profile. The node rank is not one of them: it selects which of the
# profile's [nodes.<rank>.env] sections a process applies, not what the profile is, and one hand-off
# serves every node of a launch (Ray actors on several nodes, the pods of one Kubernetes env list).
INPUT_VARS = (
    ENV_ENABLE, ENV_ENV, ENV_AUDIT_DIR, ENV_ALLOW_PARTIAL, ENV_ALLOW_UNKNOWN, ENV_AUDIT_REQUIRED,
    ENV_SGLANG_WINS, ENV_NCCL_VERSION, ENV_CONSISTENCY, ENV_CONSISTENCY_TIMEOUT, ENV_MECHANISM, ENV_LEDGER,
)

ENABLE_WORDS = frozenset({"1", "on", "true", "yes", "enable", "enabled"})
DISABLE_WORDS = frozenset({"", "0", "off", "false", "no", "disable", "disabled"})

ASCII_DIGITS = frozenset("0123456789")
# A node rank has at most this many digits. SGLang's node ranks are small integers; the bound
# keeps int() away from digit strings long enough to be slow or to exceed Python's int limit.
NODE_RANK_MAX_DIGITS = 9


def is_ascii_digits(text: str) -> bool:
    """True for a non-empty string of ASCII 0-9 only.

    ``str.isdigit()`` is not enough: it is true for "٣" or "³", which ``int()`` accepts (or
    not) while NCCL's strtoll and the C library read no digit at all.
    """
    return isinstance(text, str) and text != "" and ASCII_DIGITS.issuperset(text)


def parse_node_rank(text: str) -> int | None:
    """A node rank written as plain ASCII digits (at most 9), else None. Never raises."""
    if not is_ascii_digits(text) or len(text) > NODE_RANK_MAX_DIGITS:
        return None
    return int(text)


# Set by the root process of a launch for its descendants: a process that finds it is not the
# launcher (it inherits the launcher's decisions instead of making them).
ENV_ROOT_PID = "SGLANG_EAGLE_NCCL_ROOT_PID"

# The switch of this project's CPU test venvs (ci/sglang_venv.py copies the stand-ins of
# tests/support/sglang_cpu_standins.py into them, behind a .pth line that reads it): stand-ins for
# GPU-only kernels, so that SGLang imports on a machine without a GPU. The plugin never reads it; it
# is named here because preflight's hint for a rank that could not import SGLang names it.
ENV_TEST_CPU_STANDINS = "SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS"
# The door tests' fault point (inproc/boot/state.py fault_point, docs/fail-closed.md): a step name. Read only
# where the plugin is already enabled; never set by the plugin, never an input of the hand-off.
ENV_TEST_FAULT = "SGLANG_EAGLE_NCCL_TEST_FAULT"

# Read by `audit` only (offline/audit/records.py): "json" makes it use the json module's reader even where
# the optional msgspec reader is installed (both give the same verdict; a benchmark compares their speed).
ENV_AUDIT_READER = "SGLANG_EAGLE_NCCL_AUDIT_READER"

# The one placeholder a profile value may hold (see profile/placeholders.py).
AUDIT_DIR_PLACEHOLDER = "{audit_dir}"


def is_enabled(environ: object = None) -> bool:
    """True when ``SGLANG_EAGLE_NCCL`` is set to anything but an off word."""
    import os

    env = os.environ if environ is None else environ
    value = env.get(ENV_ENABLE)  # type: ignore[attr-defined]
    return value is not None and value.strip().lower() not in DISABLE_WORDS


def is_sglang_server_cli(argv: list[str]) -> bool:
    """``python -m sglang.launch_server ...`` or the ``sglang serve ...`` console script."""
    if "sglang.launch_server" in argv:
        return True
    return len(argv) > 2 and argv[1].rsplit("/", 1)[-1] == "sglang" and argv[2] == "serve"


# Linux refuses an execve whose single argument or environment entry ("NAME=value" plus its NUL)
# is longer than MAX_ARG_STRLEN = 32 pages (include/uapi/linux/binfmts.h).
MAX_ARG_STRLEN = 131072


def env_entry_bytes(name: str, value: str) -> int:
    """Bytes ``NAME=value`` takes in a child's environment block, terminating NUL included."""
    return len(name.encode("utf-8", "surrogateescape")) + 1 + len(value.encode("utf-8", "surrogateescape")) + 1


ALLOWED_PREFIXES = ("NCCL_", "TORCH_NCCL_")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def is_allowed_name(name: str) -> bool:
    """``NCCL_*`` / ``TORCH_NCCL_*`` made of upper-case letters, digits and underscores."""
    return (
        isinstance(name, str)
        and name.startswith(ALLOWED_PREFIXES)
        and len(name) > 5
        and _NAME_CHARS.issuperset(name)
    )


def nccl_snapshot(environ: object = None) -> dict[str, str]:
    """Only the NCCL_* / TORCH_NCCL_* part of an environment (never anything else)."""
    import os

    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if k.startswith(ALLOWED_PREFIXES)}  # type: ignore[attr-defined]

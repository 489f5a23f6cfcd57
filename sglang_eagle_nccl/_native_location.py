"""Where the installed native library (``nccl/native/``) is, without loading anything.

At the package's top level, not in ``nccl/native/``, because activation imports it at interpreter
start in every SGLang child: from there it would import two package ``__init__`` files first.
Activation sets ``NCCL_ENV_PLUGIN`` / ``NCCL_TUNER_PLUGIN`` from this process's own installation
before anything else runs; the library is loaded through ctypes (:mod:`.library`) only once SGLang is
imported, still before the first NCCL call.
"""

import os

LIBRARY_FILE = "libsglang_eagle_nccl_nccl.so"
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nccl", "native")


def library_file() -> str:
    """Absolute path of this installation's library (it may not exist: a ``CC=false`` wheel)."""
    return os.path.join(HERE, LIBRARY_FILE)


def present() -> bool:
    return os.path.isfile(library_file())


def is_ours(path: str) -> bool:
    """A path that names *a* copy of this plugin's library (this install's, or another venv's).

    A child started with another interpreter (``launch --python``) inherits the parent's value;
    it is replaced with the child's own, never mistaken for a user's plugin.
    """
    parent = os.path.dirname(path)
    return os.path.basename(path) == LIBRARY_FILE and parent.replace(os.sep, "/").endswith("sglang_eagle_nccl/nccl/native")

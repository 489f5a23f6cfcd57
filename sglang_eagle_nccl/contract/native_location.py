"""Where the installed native library (``native/``) is, without loading anything.

In ``contract/``, not in ``native/``, because activation imports it at interpreter start in every
SGLang child, and the native package's binding imports ``ctypes``: the file name and folder of the
library are the contract between the wheel build and the processes that point NCCL at it.
Activation sets ``NCCL_ENV_PLUGIN`` / ``NCCL_TUNER_PLUGIN`` from this process's own installation
before anything else runs; the library is loaded through ctypes (:mod:`.library`) only once SGLang is
imported, still before the first NCCL call.
"""

import os

LIBRARY_FILE = "libsglang_eagle_nccl_nccl.so"
HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "native")


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
    return os.path.basename(path) == LIBRARY_FILE and parent.replace(os.sep, "/").endswith("sglang_eagle_nccl/native")

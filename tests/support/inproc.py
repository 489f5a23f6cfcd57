"""This test process as a fresh process of an enabled launch, and back afterwards.

Activation, the one environment writer and the doors act on the real ``os.environ`` of the process
they run in, once per process (``STATE``). Tests that drive them in-process (so every decision is
reached by the plain tier, mutation testing included) start from no plugin variable at all and leave
everything as they found it: ``os.environ`` to the byte, the per-process state, the once-only log
keys, the armed refusal of ``import sglang``, and the native library's configuration.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from sglang_eagle_nccl.contract import log
from sglang_eagle_nccl.inproc.boot import import_trigger, state

PLUGIN_PREFIXES = ("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL")


def _put_environ(saved: dict[str, str]) -> None:
    for key in [k for k in os.environ if k not in saved]:
        del os.environ[key]
    for key, value in saved.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


@contextmanager
def fresh_process() -> Iterator[state.ProcessState]:
    saved = dict(os.environ)
    said = set(log._said)
    for key in [k for k in os.environ if k.startswith(PLUGIN_PREFIXES)]:
        del os.environ[key]
    # A fresh process's native library serves no tuner rule. The library is one per process, and a
    # command run in-process before (`tuner`, which asks it through library.query_rules) leaves the
    # rules it asked about in it.
    library = sys.modules.get("sglang_eagle_nccl.native.library")
    for loaded in list(getattr(library, "_loaded", {}).values()):
        loaded.configure_tuner([])
    state.reset()
    log._said.clear()
    try:
        yield state.STATE
    finally:
        binding = state.STATE.env_control
        if binding is not None:  # the library is one per process: leave it serving nothing
            binding.configure_env({}, {}, ())
            binding.select_group(None)
            binding.configure_tuner([])
            binding.reset_reads()
        if state.STATE.audit is not None:
            state.STATE.audit.close()
        state.reset()
        import_trigger._FINDER.callbacks.clear()
        if import_trigger._FINDER in sys.meta_path:
            sys.meta_path.remove(import_trigger._FINDER)
        log._said.clear()
        log._said.update(said)
        _put_environ(saved)


def native_library(tmp_path_factory) -> str:  # noqa: ANN001 - pytest's TempPathFactory
    """This installation's native library; compiled from the sources into a throwaway install folder
    when the checkout has none (a plain `pip install -e .` without a compiler run)."""
    from sglang_eagle_nccl.contract import native_location
    from sglang_eagle_nccl.native import build

    if native_location.present():
        return native_location.library_file()
    folder = tmp_path_factory.mktemp("install") / "sglang_eagle_nccl" / "native"
    folder.mkdir(parents=True)
    info = build.compile_library(folder / native_location.LIBRARY_FILE)
    assert info.built, f"the native library does not compile here: {info.reason}"
    return str(folder / native_location.LIBRARY_FILE)


@contextmanager
def process_with_library(monkeypatch, library: str, argv: list[str]) -> Iterator[state.ProcessState]:  # noqa: ANN001
    """A fresh process (see fresh_process) whose native library is `library` and whose command line is `argv`."""
    from sglang_eagle_nccl.contract import native_location

    monkeypatch.setattr(native_location, "HERE", os.path.dirname(library))
    monkeypatch.setattr(sys, "orig_argv", argv)
    with fresh_process() as s:
        yield s

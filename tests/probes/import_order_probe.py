"""A program of an enabled environment that imports modules in a given order, then reports what the doors did.

``python import_order_probe.py ORDER START_METHOD``: ORDER is a comma-separated list of modules to import (empty:
none), START_METHOD is ``none``, ``spawn``, ``fork`` or ``forkserver`` (a child that imports the same ORDER and
reports too). One JSON line per process on stdout: what it imported, the first import that raised (type and
message), the plugin's state, how many times this process handed the native library a configuration (calls of
the binding's ``configure_env``, seen by a ``sys.setprofile`` function set before anything else; the count is
inherited across fork, like the library's memory), and its NCCL environment. Nothing of the plugin is replaced: the ``.pth`` line ran before this.
"""

import sys

_configured: list[int] = []


def _profile(frame, event, _arg) -> None:  # noqa: ANN001 - sys.setprofile's signature
    # Imports nothing: sees every Python call of the main thread, the configuration of the library included.
    if event == "call" and frame.f_code.co_name == "configure_env" and frame.f_code.co_filename.endswith(
        "binding.py"
    ):
        _configured.append(1)


sys.setprofile(_profile)

import json  # noqa: E402
import os  # noqa: E402


def run(order: list[str]) -> dict:
    error = None
    for name in order:
        try:
            __import__(name)
        except BaseException as exc:  # noqa: BLE001 - reported, never hidden
            error = {"module": name, "type": type(exc).__name__, "message": str(exc)}
            break
    state = sys.modules.get("sglang_eagle_nccl.inproc.boot.state")
    st = getattr(state, "STATE", None)
    trigger = sys.modules.get("sglang_eagle_nccl.inproc.boot.import_trigger")
    return {
        "pid": os.getpid(),
        "order": order,
        "error": error,
        "pth_ran": st is not None,
        "active": getattr(st, "active", None),
        "refused": getattr(st, "refused", None),
        "role": getattr(st, "role", None),
        "configured": len(_configured),
        "library_bound": getattr(st, "env_control", None) is not None,
        "ctypes_loaded": "ctypes" in sys.modules,
        "sglang_loaded": "sglang" in sys.modules,
        "sglang_refusal_armed": bool(trigger and "sglang" in trigger._FINDER.callbacks and getattr(st, "refused", None)),
        "environ": dict(os.environ),
    }


def child(order: list[str], queue) -> None:  # noqa: ANN001 - a multiprocessing queue
    queue.put(run(order))


def main() -> None:
    order = [m for m in sys.argv[1].split(",") if m]
    method = sys.argv[2]
    report = run(order)
    print(json.dumps({"who": "parent", **report}), flush=True)
    if method != "none":
        import multiprocessing

        ctx = multiprocessing.get_context(method)
        queue = ctx.Queue()
        proc = ctx.Process(target=child, args=(order, queue))
        proc.start()
        out = queue.get(timeout=600)
        proc.join(600)
        print(json.dumps({"who": "child", "method": method, "exitcode": proc.exitcode, **out}), flush=True)


if __name__ == "__main__":
    main()

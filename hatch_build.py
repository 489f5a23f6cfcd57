"""Wheel build hook: compile the native NCCL plugins library into the wheel.

With a working C compiler (``$CC``, else ``cc``/``gcc``) the wheel carries
``sglang_eagle_nccl/native/libsglang_eagle_nccl_nccl.so`` and is tagged
``py3-none-linux_<arch>``: the library is plain C with no Python ABI, so one wheel serves every
Python >= 3.10. Without one (``CC=false pip wheel .``) the wheel is still built, as
``py3-none-any``, and ``build_info.json`` inside the package says why the library is missing;
``doctor`` and ``tuner`` report that reason.

Editable installs compile into the source tree (the package is imported from there); the
results are git-ignored.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

NATIVE = Path("sglang_eagle_nccl") / "native"


def _load_build_module(root: Path) -> Any:
    # The package is not importable while it is being built; load its build helper by path.
    path = root / NATIVE / "build.py"
    spec = importlib.util.spec_from_file_location("_sglang_eagle_nccl_native_build", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


class NativePluginsBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        build = _load_build_module(root)
        if version == "editable":
            out_dir = root / NATIVE
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="sglang-eagle-nccl-native-")
            out_dir = Path(self._tmp.name)
        library = out_dir / build.LIBRARY_NAME
        info = build.compile_library(library, package_version=self.metadata.version)
        info_path = out_dir / build.BUILD_INFO_NAME
        info_path.write_text(info.to_json(), encoding="utf-8")
        if version == "editable":
            if not info.built:
                library.unlink(missing_ok=True)  # a stale library must not outlive a failed build
            self.app.display_info(f"native NCCL plugins: {info.reason}")
            return
        target = (NATIVE / build.LIBRARY_NAME).as_posix()
        build_data["force_include"][str(info_path)] = (NATIVE / build.BUILD_INFO_NAME).as_posix()
        if info.built:
            build_data["force_include"][str(library)] = target
            build_data["pure_python"] = False
            build_data["tag"] = f"py3-none-{info.platform_tag}"
            self.app.display_info(f"native NCCL plugins: compiled ({info.compiler})")
        else:
            self.app.display_warning(f"native NCCL plugins not built: {info.reason}; the wheel is py3-none-any")

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            tmp.cleanup()

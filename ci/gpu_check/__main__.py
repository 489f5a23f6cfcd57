"""``python ci/gpu_check ...`` (what ``ci/gpu-check`` runs): the package directory as a script.

Python puts this directory itself first on ``sys.path`` when it runs it; its parent (``ci/``) goes
there instead, so the modules are imported as ``gpu_check.*`` and none of them can shadow a
standard-library module of the same name.
"""

import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)

from gpu_check.cli import main  # noqa: E402

sys.exit(main())

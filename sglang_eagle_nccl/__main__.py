"""``python -m sglang_eagle_nccl`` = the ``sglang-eagle-nccl`` command (for --target installs)."""

from .cli import main

main()

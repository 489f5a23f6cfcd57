"""``python -m sglang_eagle_nccl`` = the ``sglang-eagle-nccl`` command (for --target installs)."""

from sglang_eagle_nccl.cli.main import main

main()

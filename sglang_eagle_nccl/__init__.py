"""sglang-eagle-nccl: make NCCL settings reach every SGLang process and communicator.

This module is imported at interpreter start when the plugin is enabled (via the
``.pth``/``.start`` bootstrap), so it deliberately imports nothing.
"""

__version__ = "0.1.0"

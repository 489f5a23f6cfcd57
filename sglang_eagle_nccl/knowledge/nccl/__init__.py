"""What NCCL does: its variables (data/nccl_vars.toml), its parsing rules, its debug output, tuner
rules. Knows nothing of SGLang or of this plugin's processes.

This file imports nothing: importing a subpackage costs nothing.
"""

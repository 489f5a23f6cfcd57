"""The `sglang-eagle-nccl` command: one module per command group, thin (parse, call, print).

This file imports nothing: importing a subpackage costs nothing.
"""

"""Evidence: per-process audit records and launch directories, reading and judging them, the
cross-rank consistency check, and the cross-check with NCCL's own output.

This file imports nothing: importing a subpackage costs nothing.
"""

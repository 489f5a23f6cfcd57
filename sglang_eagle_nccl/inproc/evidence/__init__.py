"""Evidence gathered inside a process while SGLang builds its groups: the cross-rank consistency check.

This file imports nothing: importing a subpackage costs nothing.
"""

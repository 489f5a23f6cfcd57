"""Exactly what an enabled process imports at interpreter start (the wheel test pins this folder):
the bootstrap, activation (check, then write), per-process state, the audit writer, the native
plugin's early configuration and the post-import trigger.

This file imports nothing: importing a subpackage costs nothing.
"""

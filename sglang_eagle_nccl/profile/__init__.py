"""Profiles: the validated, immutable NCCL settings a user asked for, where they come from (built-in
names, TOML files, flags, environment) and the one wire format that carries them to child processes.

This file imports nothing: importing a subpackage costs nothing.
"""

"""Programs that start SGLang processes with a profile: the `launch` wrapper and `preflight`
(SGLang's real distributed init in spawned ranks, no model).

This file imports nothing: importing a subpackage costs nothing.
"""

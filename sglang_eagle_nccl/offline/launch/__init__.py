"""Programs that start SGLang processes with a profile: the `launch` wrapper, `preflight`, and the one
child-environment builder (also behind `env`).

This file imports nothing: importing a subpackage costs nothing.
"""

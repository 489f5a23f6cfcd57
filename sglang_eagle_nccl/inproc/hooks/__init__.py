"""The hooks on SGLang (launcher, scheduler, groups, PyNccl, EAGLE workers, the CLI flags) and how
they are installed (wrapt or SGLang's HookRegistry), once SGLang is imported.

This file imports nothing: importing a subpackage costs nothing.
"""

"""What runs inside SGLang's processes: activation at interpreter start or from SGLang's plugin
loader, the hooks, how they are installed (wrapt or SGLang's HookRegistry), patch-set selection,
per-process state and the plugin's writes to os.environ.

This file imports nothing: importing a subpackage costs nothing.
"""

"""The plugin's deliberate stops: errors that must reach the user, never be swallowed.

A hook that fails by accident is reported and SGLang continues; one of these (a profile that
cannot be applied, ranks that disagree, an SGLang release the plugin cannot cover, an audit
that is required but cannot be written) always propagates. Kept import-free so the hook
runner can recognise them without importing the modules that raise them.
"""


class PluginStop(Exception):
    """Base class of every error the plugin raises on purpose."""

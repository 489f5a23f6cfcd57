"""What runs in the plugin's CLI, never inside SGLang's processes: audit/ (read, judge), launch/
(the launch wrapper, preflight, child environments), doctor, sizes/ (the `sizes` command),
speclog/ (SGLang log analysis).

This file imports nothing: importing a subpackage costs nothing.
"""

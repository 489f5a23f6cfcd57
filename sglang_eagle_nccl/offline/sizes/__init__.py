"""The `sizes` command: the all-reduce message bytes of a speculative server's phases and the path
SGLang would give each. shape (a model's hidden size and dtype, from its config.json), report (the
bytes of each phase, the tuner rule each matches), paths (the implementation SGLang would pick for
one message size), render (the report as the commands print it).

This file imports nothing: importing a subpackage costs nothing.
"""

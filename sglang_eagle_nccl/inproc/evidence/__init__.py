"""Evidence gathered inside a process while SGLang builds its groups: the cross-rank consistency check
(consistency), and what each group enabled for its all-reduces, read from the live objects (allreduce_readers).

This file imports nothing: importing a subpackage costs nothing.
"""

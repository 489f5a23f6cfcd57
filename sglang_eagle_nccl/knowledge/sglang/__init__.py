"""What SGLang does, per release: patch sets (the manifests in patches/), hook target checks
against SGLang's source, and which all-reduce implementation SGLang picks (data/allreduce_paths.toml).

This file imports nothing: importing a subpackage costs nothing.
"""

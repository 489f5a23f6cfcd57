"""What runs inside SGLang's processes (and preflight's ranks): boot/ at interpreter start, hooks/
once SGLang is imported, evidence/ while communicators are created, the one environment writer.

This file imports nothing: importing a subpackage costs nothing.
"""

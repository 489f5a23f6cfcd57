"""Offline diagnosis: SGLang log analysis, speculative-decoding estimates, and doctor (what is
installed and what would apply). Never runs inside SGLang's processes.

This file imports nothing: importing a subpackage costs nothing.
"""

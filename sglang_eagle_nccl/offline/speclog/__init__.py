"""Speculative-decoding diagnosis from SGLang's logs (`analyze`) and the break-even estimate (`estimate`).

This file imports nothing: importing a subpackage costs nothing.
"""

"""Speculative-decoding diagnosis from SGLang's logs (`analyze`: read by parse, judged by analyze, shown by
render) and the break-even estimate (`estimate`).

This file imports nothing: importing a subpackage costs nothing.
"""

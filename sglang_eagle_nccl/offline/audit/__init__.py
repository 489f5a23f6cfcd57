"""Reading a launch directory as hostile input, judging its records, and showing the verdict.

This file imports nothing: importing a subpackage costs nothing.
"""

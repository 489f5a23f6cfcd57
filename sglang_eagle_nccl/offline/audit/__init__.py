"""Reading a launch directory as hostile input, judging its records, and showing the verdict.

The verdict is a function of the set of evidence -- order-independent, idempotent, copies reconciled,
monotone, strays not judged -- by the rules written in :mod:`.read`'s docstring; the work is bounded
by one budget over the whole audit (:mod:`.records`).

This file imports nothing: importing a subpackage costs nothing.
"""

"""The launch's decision: what every process of a launch gets, decided in one place.

Read by the launchers (``launch``, ``preflight``, ``env``), by the commands that only look
(``validate``, ``doctor``) and by activation in each process, so all of them get the same answer
on the same inputs. Nothing here writes: no environment variable, no key, no launch directory.
"""

"""pytest plugin loaded by ci/mutation for mutmut's runs (``-p mutation_plugin``); nothing else uses it.

mutmut tells its trampolines which mutant is active through ``MUTANT_UNDER_TEST`` (and a process-local
copy). During its first pass ("stats": which tests reach which function) a trampoline records the
call, which loads mutmut's configuration from the *working directory*. Several plain-tier tests run
the plugin in a child process with another working directory (a ``tmp_path``); such a child would
inherit ``MUTANT_UNDER_TEST=stats``, find no configuration there and fail, and the whole run would
stop before the first mutant. So, in that pass only, the variable is taken out of this process's
environment: mutmut still reads its process-local copy here, and the children run the unmutated
code as in any plain run. While a mutant is tested the variable stays, so children run that mutant
too and a test that kills it through a child counts.
"""

from __future__ import annotations

import os


def pytest_configure(config: object) -> None:
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        del os.environ["MUTANT_UNDER_TEST"]

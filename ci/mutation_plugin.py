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


# Tests that read the package's source text (not its behaviour): under mutmut every mutated file holds
# the original function and all its mutants side by side, so a static scan of write sites sees
# events spelled 'XXrefusedXX' and calls with a field missing, whichever mutant is active. They
# guard the events table against its writers (tests/unit/contract/test_events.py) and the names in messages, not a decision; every
# other plain-tier test runs.
SOURCE_SCANS = (
    "tests/unit/contract/test_events.py::test_every_python_write_site_matches_its_row",
    "tests/unit/contract/test_events.py::test_every_row_is_written_and_every_declared_field_is_set_by_some_writer",
    "tests/unit/contract/test_events.py::test_the_writer_named_in_each_row_writes_it",
    # Every SGLANG_EAGLE_NCCL_* name a message mentions exists: a scan of the source, which under
    # mutmut also holds each mutated name ('XXSGLANG_EAGLE_NCCLXX').
    "tests/unit/test_message_references.py::test_every_plugin_variable_in_a_message_exists",
)


def pytest_collection_modifyitems(config: object, items: list) -> None:
    keep, drop = [], []
    for item in items:
        (drop if item.nodeid.split("[")[0] in SOURCE_SCANS else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep

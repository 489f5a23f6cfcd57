"""Problems are listed in the order the user wrote the values (issue 27), and `validate` never says it
applied anything.

The rule (profile/sources.py, _Layer.order): sources in precedence order -- the profile files in the
order given, then SGLANG_EAGLE_NCCL_ENV, then --nccl-env -- each in its own order (a file: as TOML
reads it); a value written again by a later source is listed at that later place. Before, a file
that extends a built-in listed its problems in the built-in's order (the reverse of the file's, for
the README's example).

The reference below states the expected order from the generated input alone.
"""

from __future__ import annotations

import re

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.cli.main import main

# One value NCCL reads wrongly (exactly one error each) and one it reads as meant, per variable.
VALUES = {
    "NCCL_BUFFSIZE": ("4M", "4194304"),
    "NCCL_P2P_LEVEL": ("nvl", "SYS"),
    "NCCL_PROTO": ("LLX", "LL"),
    "NCCL_ALGO": ("Rnig", "Ring"),
    "NCCL_NTHREADS": ("abc", "256"),
    "NCCL_MAX_NCHANNELS": ("-1", "8"),
    "NCCL_SOCKET_NTHREADS": ("x", "2"),
}
PROBLEM = re.compile(r"^  - \[[^\]]*\] (NCCL_[A-Z0-9_]+)=", re.M)


def expected_order(file_items, env_items, flag_items):
    """The variables whose final value is bad, in the order their final value was written."""
    final: dict[str, bool] = {}
    for name, bad in [*file_items, *env_items, *flag_items]:
        final.pop(name, None)  # written again: it moves to its latest place
        final[name] = bad
    return [name for name, bad in final.items() if bad]


def _items(draw, min_size=0):
    names = draw(st.lists(st.sampled_from(sorted(VALUES)), unique=True, min_size=min_size, max_size=len(VALUES)))
    return [(n, draw(st.booleans())) for n in names]


@st.composite
def inputs(draw):
    return (_items(draw, 1), _items(draw), _items(draw), draw(st.booleans()))


@settings(max_examples=40, deadline=None)
@given(case=inputs())
def test_problems_follow_the_written_order(case, tmp_path_factory):
    file_items, env_items, flag_items, extends = case
    folder = tmp_path_factory.mktemp("order")
    lines = ['extends = "pcie-8gpu"'] if extends else []
    lines.append("[env]")
    lines += [f'{n} = "{VALUES[n][0 if bad else 1]}"' for n, bad in file_items]
    profile = folder / "p.toml"
    profile.write_text("\n".join(lines) + "\n")
    env = " ".join(f"{n}={VALUES[n][0 if bad else 1]}" for n, bad in env_items)
    args = ["validate", str(profile)]
    for n, bad in flag_items:
        args += ["--nccl-env", f"{n}={VALUES[n][0 if bad else 1]}"]
    result = CliRunner().invoke(main, args, env={"SGLANG_EAGLE_NCCL_ENV": env})
    want = expected_order(file_items, env_items, flag_items)
    assert PROBLEM.findall(result.output) == want, (lines, env, flag_items, result.output)
    assert result.exit_code == (1 if want else 0)
    # validate only checks: it never claims to have applied (or not applied) anything.
    assert "applied" not in result.output


def test_readme_example_lists_the_file_in_its_order(tmp_path, monkeypatch):
    """The shrunk example: a file extending pcie-8gpu with three bad values, listed last to first before."""
    monkeypatch.delenv("SGLANG_EAGLE_NCCL_ENV", raising=False)
    profile = tmp_path / "my.toml"
    profile.write_text('extends = "pcie-8gpu"\n[env]\nNCCL_BUFFSIZE = "4M"\nNCCL_P2P_LEVEL = "nvl"\nNCCL_PROTO = "LLX"\n')
    result = CliRunner().invoke(main, ["validate", str(profile)])
    assert result.exit_code == 1
    assert result.output.splitlines()[0] == "3 problem(s) in the NCCL profile:"
    assert PROBLEM.findall(result.output) == ["NCCL_BUFFSIZE", "NCCL_P2P_LEVEL", "NCCL_PROTO"]

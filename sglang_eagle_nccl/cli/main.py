"""``sglang-eagle-nccl``: the command group. Each command lives in the module of its group.

Exit codes: 0 success; 1 a negative verdict (``validate`` found errors, ``audit`` found a
communicator without the profile, ``preflight`` failed); 2 bad input (unknown profile,
malformed file or flag), in which case nothing was applied or started.
"""

from __future__ import annotations

import click

from sglang_eagle_nccl import __version__
from sglang_eagle_nccl.cli import audit, diagnose, profiles, run, tuner
from sglang_eagle_nccl.cli import sizes as sizes_cli
from sglang_eagle_nccl.cli.help_format import unbroken_hyphens


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="sglang-eagle-nccl")
def main() -> None:
    """Make NCCL settings reach every SGLang process and communicator, and prove it.

    \b
    Three ways to use a profile:
      sglang-eagle-nccl launch --profile pcie-8gpu -- --model-path M --tp 8 ...
      python -m sglang.launch_server ... --nccl-profile pcie-8gpu --nccl-env NCCL_PROTO=LL
      SGLANG_EAGLE_NCCL=pcie-8gpu python my_engine_script.py        (Engine API)

    \b
    Then read what every process and communicator actually got:
      sglang-eagle-nccl audit <audit dir printed at start>
    """


for _command in (
    profiles.profiles, profiles.explain, profiles.validate,
    run.launch, run.env_cmd, run.preflight,
    audit.audit_cmd,
    diagnose.doctor, diagnose.analyze, diagnose.estimate,
    tuner.tuner_cmd,
):
    main.add_command(_command)

main.add_command(sizes_cli.sizes)
unbroken_hyphens([main])


if __name__ == "__main__":  # pragma: no cover
    main()

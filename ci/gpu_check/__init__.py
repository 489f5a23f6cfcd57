"""GPU verification: what NCCL itself says each process read, against the plugin's audit.

    ci/gpu-check [--python PY | --wheels DIR [--python BASE]] [--out DIR] [--profile P]
                 [--nccl-env KEY=VALUE ...] [--skip-engine] [--check-only] [--work-dir DIR]
    ci/gpu-check --cpu-rehearsal [--python PY] [--nccl-lib PATH/libnccl.so.2] ...

On one GPU, with NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING and one NCCL_DEBUG_FILE per
process added to the profile (default ``pcie-8gpu``):

  (a) ``sglang-eagle-nccl preflight --tp 1 --backend nccl``: the installed SGLang's own distributed
      init with the plugin, one all-reduce per group, so every group gets a real 1-rank NCCL
      communicator;
  (b) a real SGLang engine (Engine API, plugin enabled by environment): tiny dummy-weight Llama
      target + EAGLE-3 draft from local configs, ``load_format=dummy``, ``skip_tokenizer_init``,
      CUDA graphs on, the phase ledger on (``SGLANG_EAGLE_NCCL_LEDGER=1``); a few requests, then
      shutdown; the ledger must show the extend and target-verify steps and, on a GPU, CUDA-graph
      replays (``ledger_check``);
  (c) every NCCL debug file parsed; per process, each profile variable NCCL reports must equal the
      profile and the plugin's audit of that pid (``sglang-eagle-nccl audit RUN --nccl-debug-dir
      DIR --json``), and NCCL must have run only in audited processes;
  (d) the native plugins: a process activated only through ``SGLANG_EAGLE_NCCL`` (the environment
      ``sglang-eagle-nccl env --audit-dir`` prints for a profile with tuner rules, default
      ``pcie-8gpu-eagle``) imports SGLang and creates a one-rank NCCL communicator (torch, backend
      nccl, one all-reduce): NCCL's own "Successfully loaded external env/tuner plugin" lines, and
      the audit's ``nccl_reads`` holding the profile's values. One rank never asks the tuner for an
      algorithm, so the tuner's choices are not part of it.

``--cpu-rehearsal`` runs the same steps without CUDA: (a) with gloo, (b) on CPU with the test
stand-ins (SGLang >= 0.5.23 built by ci/sglang_venv.py), and (d) with the real libnccl.so.2 of the
nvidia-nccl-cu13 wheel through ctypes: ncclGetUniqueId loads the env plugin and reads
NCCL_SOCKET_IFNAME through it (NCCL logs "set by environment to lo", which goes through the same
audit cross-check (c) as on a GPU, since gloo loads no NCCL), then the communicator init fails for
want of a CUDA device, before NCCL would load the tuner.

The report (gpu-check.json, gpu-check.txt, gpu-check-logs.tar.gz) goes to --out, default $OUT when
set (the device tool brings back what is written there), else ./gpu-check-report.
Exit status: 0 everything agreed; 1 a disagreement or a failed check; 2 something needed is missing
or the arguments are wrong (what is missing and how to fix it is printed and in the report).

The package: standard library only, so any python3 >= 3.10 drives it. Everything that needs torch,
SGLang or the plugin runs in child processes of the checked interpreter (--python, or the overlay
venv --wheels builds), including this package's own ``--child-engine`` mode and
``one_rank_comm.py``. Modules, in the order a run uses them:

  cli           arguments, the run (steps in order), the report written whatever happened
  common        paths, constants, options, one step's record, small pure helpers
  procs         child processes in their own session, killed whole at their timeout
  environment   the checked Python: overlay venv, what it has, what stops each step
  context       what the steps share: profile validation, the audit with its NCCL cross-check
  steps         (a) preflight, (b) engine
  ledger_check  (b)'s phase ledger, judged (pure)
  native_step   (d) the native plugins in a one-rank communicator (child: one_rank_comm.py)
  engine_child  (b)'s child, run under the checked interpreter
  judging       pure judging of NCCL output against the audit; the exit status
  report        gpu-check.json, gpu-check.txt, the logs tarball
"""

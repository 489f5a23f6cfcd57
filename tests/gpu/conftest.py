"""gpu tier: ci/gpu-check end to end. The CPU rehearsal needs the SGLang 0.5.23 CPU venv of
ci/sglang_venv.py and the nvidia-nccl-cu13 wheel (in this interpreter or that venv); the GPU test
needs an NVIDIA GPU. Not part of plain `python -m pytest`; ci/test runs it.

    python3 ci/sglang_venv.py build 0.5.23 && pip install "nvidia-nccl-cu13==2.32.3"
    pytest tests/gpu
"""

"""The native NCCL env and tuner plugins: C sources (src/), their build, and the ctypes binding.

This file imports nothing: importing a subpackage costs nothing.
"""

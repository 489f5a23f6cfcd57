"""Pure facts and checks, no processes touched: what NCCL does (nccl/) and what SGLang does (sglang/:
patch sets, hook targets, all-reduce dispatch).

This file imports nothing: importing a subpackage costs nothing.
"""

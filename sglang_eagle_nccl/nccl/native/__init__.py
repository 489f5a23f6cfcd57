"""Native NCCL plugins: the C env + tuner plugin library (src/), its build helper and the ctypes layer."""

"""What the machine has: CUDA toolkits, Pythons, compilers, GPUs, memory and disk."""

"""Read the real GPU (NVML, torch) and allocate the real pools. Only this package imports torch or pynvml,
and only inside the functions that need them."""

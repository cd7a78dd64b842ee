"""From kernel to model: the end-to-end workload around a task's kernel (e2e), where a model step
spends its time kernel by kernel (step_profile), the per-bucket dispatcher that `sessions export`
writes (dispatch), and a model's kernels measured on a GPU beside the eager and compiled reference
against the roofline (dsv4_bench: the DeepSeek V4 attention tasks; bench/dsv4.py is its command line).
A change to how a kernel's win is judged in its model goes here.
"""

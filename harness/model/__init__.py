"""From kernel to model: the end-to-end workload around a task's kernel (e2e), where a model step
spends its time kernel by kernel (step_profile), the per-bucket dispatcher that `sessions export`
writes (dispatch), and a model's kernels measured on a GPU against the roofline and judged by the
model's targets (dsv4_bench: the DeepSeek V4 attention tasks beside the eager and compiled reference;
dsv4_targets: issue 19's targets for its decode kernels; bench/dsv4.py and bench/dsv4_targets.py
are their command lines). A change to how a kernel's win is judged in its model goes here.
"""

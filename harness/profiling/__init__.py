"""Measuring on the GPU: copy bandwidth, L2 flush and CUDA-graph replay timing (measure), the
bottleneck profile of a kernel per shape (profile), and where a time stands against the
memory roofline (roofline). bench/ scripts and the evaluator use these; nothing here decides.
The reports bench/ prints are drawn here too: a task's per-shape table against the references
and the roofline (compare), and the evaluator's own speed, candidates a minute through real
sessions on each backend (throughput: the one module here that runs the loop).
"""

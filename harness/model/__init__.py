"""From kernel to model: the end-to-end workload around a task's kernel (e2e), where a model step
spends its time kernel by kernel (step_profile), and the per-bucket dispatcher that
`sessions export` writes (dispatch). A change to how a kernel's win is judged in its model goes here.
"""

"""What people write and the harness reads: tasks (task.toml, reference, baseline, the input
contract, `tasks new` and `tasks validate`), context packs and hardware packs, the TOML key
checks that name a misspelt key, whether this machine runs a task's DSL, and the user's
config folder. A change to a file format people author goes here.
"""

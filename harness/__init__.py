"""The engine: everything warpsmith does without a screen. Where a change goes:

- loop.py, decision.py, events.py, prompt.py, wiring.py: the autoresearch loop (propose, check,
  evaluate, decide, keep or revert), the typed events it emits, the prompt it sends, and how a Loop is
  built from the options; headless.py is its line-printing front end for `run --headless`.
- agents/: who proposes (the keyless tuner, Anthropic, OpenAI, an OpenAI-compatible server).
- guard/: the static stage (tree-sitter rules) a candidate meets before any GPU time.
- evaluate/: the sandboxed child, correctness, timing and the verdict.
- authoring/: the files people write (tasks, packs, hardware packs) and the checks of them.
- sessions/: a session's folder, journal, git workspace, and what is read back out of them.
- profiling/: measuring on the GPU (copy bandwidth, graph timing, bottleneck profile, roofline), and the
  reports bench/ prints from it (the per-shape compare table, the evaluator's throughput).
- model/: from kernel to model (the end-to-end workload, the step profile, the per-bucket dispatcher).
- sourcefile.py, interp.py, invocation.py, rich_console.py: small shared parts (source bytes as judged,
  Triton-interpreter fixes, how this process was started, the console a command prints through).

The command line (warpsmith/) and the TUI (tui/) sit above this package; nothing here imports them.
"""

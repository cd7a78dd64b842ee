"""The command line: `warpsmith ...` (and `python -m warpsmith`), a layer above the engine (harness/)
and the terminal UI (tui/). It parses arguments, builds the loop through harness.wiring, and opens
the TUI or runs headless; nothing below it imports it (pyproject.toml's import-linter contracts).

What belongs here: one module a command under commands/, their argument parsing and their printing.
What does not: anything the TUI or a worker process needs too (that lives in harness/)."""

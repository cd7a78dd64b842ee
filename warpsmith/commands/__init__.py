"""One module per subcommand (warpsmith/cli.py). build_parser imports all of them on every start, `--help`
included, so a command module imports at its top only what is already loaded by then (the stdlib, harness.authoring.tasks,
harness.sessions.session, harness.authoring.packs...) and its handlers import the rest (tree-sitter, SDKs, torch, rich, the loop)."""

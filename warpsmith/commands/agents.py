"""`warpsmith agents [--prices] [--json]`: which agents exist, whether their keys are set (never the
keys themselves), where the config and price files are, and the prices in force."""
from __future__ import annotations

import argparse
import json
import os
import sys

# Heavier imports stay inside the functions: cli.build_parser imports every command module on each
# start (`--help` too), so only modules already loaded by then are imported here (commands/__init__.py).


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("agents", help="list agents, key status, config and price files")
    p.add_argument("--prices", action="store_true", help="also print the price table in force")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_agents)


KEYS = {"anthropic": ("ANTHROPIC_API_KEY",), "openai": ("OPENAI_API_KEY",),
        "openai-compat": ("WARPSMITH_COMPAT_API_KEY",)}
ABOUT = {"tuner": "offline knob search, no model", "script:DIR": "replays DIR/*.py in name order",
         "anthropic:MODEL": "Claude, Messages API, extended thinking",
         "openai:MODEL": "OpenAI, Responses API, reasoning summaries",
         "openai-compat:URL[#MODEL]": "vLLM / SGLang / Ollama / llama.cpp, Chat Completions"}


def key_status(provider: str, cfg: dict) -> str:
    for name in KEYS[provider]:
        if os.environ.get(name):
            return f"set ({name})"
    section = cfg.get(provider)
    if isinstance(section, dict) and section.get("api_key"):
        return "set (config file)"
    return "not needed unless the server wants one" if provider == "openai-compat" else "missing"


def cmd_agents(args: argparse.Namespace) -> int:
    # the agents package is not loaded at --help's start (commands/__init__.py)
    from harness.agents.budget import PriceTable
    from harness.agents.config import AgentConfigError, config_path, load_config

    try:
        cfg = load_config()
        table = PriceTable.load()
    except AgentConfigError as e:
        print(f"warpsmith: {e}", file=sys.stderr)
        return 2
    keys = {p: key_status(p, cfg) for p in KEYS}
    prices = [{"provider": prov, "model": model, "input": p.input, "cache_read": p.cache_read,
               "cache_write": p.cache_write, "output": p.output}
              for prov, models in sorted(table.prices.items()) for model, p in sorted(models.items())]
    if args.json:
        out = {"agents": ABOUT, "keys": keys, "config": str(config_path()),
               "price_files": [str(s) for s in table.sources]}
        if args.prices:
            out["prices_usd_per_mtok"] = prices
        print(json.dumps(out, indent=2))
        return 0
    for spec, about in ABOUT.items():
        provider = spec.split(":")[0]
        key = f"  key: {keys[provider]}" if provider in keys else ""
        print(f"  {spec:<27} {about}{key}")
    print(f"config: {config_path()}{'' if config_path().is_file() else ' (absent)'}")
    print("prices: " + ", ".join(str(s) for s in table.sources))
    if args.prices:
        print(f"\n  {'provider':<14} {'model':<26} {'input':>8} {'cached':>8} {'cache wr':>8} {'output':>8}  USD/Mtok")
        for r in prices:
            cr = "-" if r["cache_read"] is None else f"{r['cache_read']:g}"
            cw = "-" if r["cache_write"] is None else f"{r['cache_write']:g}"
            print(f"  {r['provider']:<14} {r['model']:<26} {r['input']:>8g} {cr:>8} {cw:>8} {r['output']:>8g}")
    return 0

"""Who proposes a candidate: the keyless parameter-search tuner (tuner*.py, tune*.py), the scripted
agent that replays candidate files (script.py), the LLM agent over the Anthropic and OpenAI SDKs or an
OpenAI-compatible server (llm.py, anthropic.py, openai.py), the registry that picks one from the
options, and the preflight that checks a key or URL before a session starts."""

"""The proposers: everything that answers "give me one candidate" for the loop, and nothing of the loop;
and the yardstick of the tuner, its spaces swept whole on a GPU.

    base.py                 the protocol every agent speaks (ProposalContext in, a stream of AgentEvents out)
    registry.py             `--agent SPEC` -> an agent; preflight.py: can that spec start? (no SDK, no request)
    script.py               replays a folder of prepared candidates
    tuner.py                the offline default: a search over declared knobs and variants, with its parts
                            tunespace.py, tuner_knobs.py, tunemodel.py, tunesearch.py, tuneideas.py
    llm.py                  the LLM agent's propose() state machine, that the providers plug into:
                            anthropic.py (Messages API), openai.py (Responses API, OpenAI-compatible servers)
    config.py, budget.py    what the LLM agents share: config file and keys, prices and the session's budget,
    retry.py, extract.py,   sorting failures and waiting to retry, the candidate out of an answer,
    transcript.py           the Markdown transcript of a proposal
    variant_sweep.py        not a proposer: every variant x configuration x shape timed on a GPU, what the
                            tuner's result is judged against (bench/variant_sweep.py is its command line)

Only the provider modules import an SDK, and only they, llm.py and retry.py the HTTP client (httpx2): the tuner,
the registry and the preflight run where neither is installed.
"""

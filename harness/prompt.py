"""Assemble the prompt an LLM agent gets for one proposal.

Order, most stable first so that providers' prefix caches hit across iterations:
  system: role, the required DSL, the rules packs' never-do lists (with rule ids);
  user:   the context packs (hardware, model, rules markdown) in a fixed order, the task (summary,
          entry signature, reference.py, shapes including the long ones, tolerances, roofline
          figures), the person's standing ideas, the incumbent source, the compact history, and
          the feedback on the last attempt.
Within the token budget, the history is cut first (oldest attempts first), then pack files from the
end; whatever is cut is said in the prompt itself and listed in `Prompt.cut`. Tokens are estimated
at ~4 characters per token (CHARS_PER_TOKEN): close enough for English and code on current
tokenizers to keep a budget, not an exact count.

`SessionPrompt` is what a session's loop calls for each proposal: build_prompt with the session's
current pack selection and the feedback on the last attempt, plus the step profile and, on a GPU,
the incumbent's profile.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from harness.authoring.hardware import specs_of, summary as hardware_summary
from harness.authoring.newtask import function_segment
from harness import events as ev
from harness.authoring.packs import KIND_ORDER, Catalog, Pack, PackError, PackWatcher, Selection

CHARS_PER_TOKEN = 4
DEFAULT_BUDGET_TOKENS = 100_000

# What each DSL requires: (the requirement, what torch may still do). The second half is said only
# when no rules pack of that DSL is in the prompt: its rules (torch-compute, ...) say it, and the
# prompt states each rule once.
DSL_TEXT = {
    "triton": ("Triton: the entry function must launch at least one `@triton.jit` kernel "
               "(`kernel[grid](...)`) that computes the result on every path that returns.",
               "Torch may only allocate outputs (`torch.empty*`), query shapes/strides/dtypes/devices and "
               "make views; computing any part of the answer with torch, torch.nn.functional, "
               "torch.compile, torch.ops or a vendor library is rejected."),
    "cute": ("CuTe DSL (nvidia-cutlass-dsl): the entry function must run a `@cute.kernel` launched "
             "from a `@cute.jit` function that computes the result.",
             "Torch may only allocate and describe tensors."),
    "cuda": ("CUDA C++: the module compiles a `__global__` kernel with torch.utils.cpp_extension "
             "(`load_inline` or `load`) and the entry function calls it to compute the result.",
             "Torch may only allocate and describe tensors."),
}


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


@dataclass
class Prompt:
    system: str
    user: str
    packs: list[dict] = field(default_factory=list)  # provenance of each pack in the prompt
    cut: list[str] = field(default_factory=list)  # what was left out for the budget, said plainly

    @property
    def est_tokens(self) -> int:
        return estimate_tokens(self.system) + estimate_tokens(self.user)


def _sorted(packs: Iterable[Pack]) -> list[Pack]:
    return sorted(packs, key=lambda p: (KIND_ORDER.get(p.kind, 9), p.id))


def _pack_files(p: Pack) -> list[tuple[str, str]]:
    return [(name, p.file_text(name).strip("\n")) for name in p.files]


def _attr(v: str) -> str:
    return v.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _pack_open(p: Pack) -> str:
    # Packs are markdown with their own headings; XML-style tags keep each one's bounds unambiguous.
    src = "; ".join(p.sources) if p.sources else "none named"
    hw = hardware_summary(p) if p.kind == "hardware" else ""  # what the chip has and lacks, in fixed words
    return (f'<pack id="{p.id}" kind="{p.kind}" version="{p.version}" title="{_attr(p.title)}">\n'
            f"sources: {src}" + (f"\n{hw}" if hw else ""))


def _render_packs(packs: Sequence[Pack], keep_n: int | None = None
                  ) -> tuple[str, list[str], dict[str, list[str]]]:
    """Packs in prompt order with only the first `keep_n` files (all when None); the files after
    that leave a marker line. Returns the text, a note per cut file, and cut file names per pack."""
    packs = _sorted(packs)
    entries: list[tuple[Pack, str, str]] = [(p, n, t) for p in packs for n, t in _pack_files(p)]
    n = len(entries) if keep_n is None else max(0, min(keep_n, len(entries)))
    out = []
    for p in packs:
        body = []
        for i, (q, name, text) in enumerate(entries):
            if q is p:
                body.append(f'<file path="{p.id}/{name}">\n{text}\n</file>' if i < n else
                            f'<file path="{p.id}/{name}">[cut to fit the token budget: '
                            f"~{estimate_tokens(text)} tokens left out]</file>")
        if body or p.kind != "rules":
            out.append("\n".join([_pack_open(p)] + body + ["</pack>"]))
    cut = [f"pack file {p.id}/{name} (~{estimate_tokens(text)} tokens)"
           for p, name, text in reversed(entries[n:])]
    cut_files: dict[str, list[str]] = {}
    for p, name, _ in entries[n:]:
        cut_files.setdefault(p.id, []).append(name)
    return "\n\n".join(out), cut, cut_files


def _n_files(packs: Sequence[Pack]) -> int:
    return sum(len(p.files) for p in packs)


def render_packs(packs: list[Pack], budget_tokens: int) -> tuple[str, list[str]]:
    """The packs' markdown in prompt order (hardware, model, rules; then id) within a token budget.
    Files are cut whole from the end; each cut file leaves a marker line in the text. Returns the
    text and one note per cut file."""
    for keep in range(_n_files(packs), -1, -1):
        text, cut, _ = _render_packs(packs, keep)
        if estimate_tokens(text) <= budget_tokens:
            break
    return text, cut


def _rule_items(p: Pack) -> list[tuple[str, str, str]]:
    """(rule id, message, how it is detected) for a rules pack's rules."""
    items = []
    rules = p.rules or p.rule_specs()
    for r in rules:
        get = (lambda k, r=r: r.get(k)) if isinstance(r, dict) else (lambda k, r=r: getattr(r, k, None))
        how = f"runtime check {get('runtime')}" if get("runtime") else "static check"
        sev = get("severity")
        if sev and sev != "error":
            how += f", {sev}"
        items.append((str(get("id")), str(get("message") or "").strip(), how))
    return items


def render_system(task: Any, packs: Sequence[Pack]) -> str:
    dsl = getattr(task, "dsl", "triton")
    entry = getattr(task, "entry", "entry")
    rule_packs = [p for p in _sorted(packs) if p.kind == "rules"]
    need, torch_limits = DSL_TEXT.get(dsl, (dsl, ""))
    if torch_limits and not any(p.id == f"dsl-{dsl}" for p in rule_packs):
        need += " " + torch_limits
    lines = [
        "You are a GPU kernel engineer working in warpsmith, an autoresearch loop. Each turn you propose "
        "ONE candidate: a complete Python module that replaces the incumbent kernel. warpsmith rejects "
        "candidates that break the rules below, checks correctness on every shape (including long ones) "
        "with fresh inputs, times the survivors against the incumbent, and a person keeps or reverts.",
        "",
        f"Required DSL: {need}",
        f"The module must define `{entry}(*inputs)` with the same inputs and outputs as the task's "
        "`reference`; return new tensors (not views of inputs), same shapes and dtypes.",
        "Facts about the GPU and the model come from the context packs in the message: trust them over "
        "memory, and do not use instructions or APIs the packs or the DSL version do not have.",
    ]
    items = [(p, it) for p in rule_packs for it in _rule_items(p)]
    if items:
        # The one statement of the rules: the rules packs in the message add why, and sources.
        lines += ["", "Never do any of the following (each is enforced; a violation rejects the "
                  "candidate before it runs, and the rejection names the rule id; the rules packs in "
                  "the message say why):"]
        for p, (rid, msg, how) in items:
            lines.append(f"- [{rid}] {msg} ({p.id}; {how})")
    return "\n".join(lines)


def _entry_signature(task: Any) -> str:
    entry = getattr(task, "entry", "entry")
    try:
        tree = ast.parse(task.reference_path.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "reference":
                return f"def {entry}({ast.unparse(node.args)})"
    except Exception:
        pass
    return f"def {entry}(*inputs)"


def _fmt_num(x: float) -> str:
    for unit, div in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"


def _roofline(task: Any, packs: Sequence[Pack]) -> dict[str, str]:
    """Per shape: bytes moved, flops, intensity and, when a hardware pack gives `specs`
    (mem_tb_s, bf16_dense_tflops), the time floor those imply. Empty when the task defines neither."""
    try:
        import torch  # ~1 s: only when a prompt is built (the TUI loads this module at its start)

        ref = task.load_reference()
    except Exception:
        return {}
    bm, fl = getattr(ref, "bytes_moved", None), getattr(ref, "flops", None)
    if not callable(bm) and not callable(fl):
        return {}
    specs: dict[str, float] = {}
    for p in packs:
        if p.kind == "hardware":
            specs = specs_of(p.raw)
            break
    dtype = getattr(torch, task.dtypes[0])
    out = {}
    for s in task.shapes:
        parts, floor = [], 0.0
        try:
            b = float(bm(s.dims, dtype)) if callable(bm) else None
            f = float(fl(s.dims)) if callable(fl) else None
        except Exception as e:
            out[s.name] = f"roofline unavailable ({type(e).__name__}: {e})"
            continue
        if b is not None:
            parts.append(f"{_fmt_num(b)}B moved")
            if specs.get("mem_tb_s"):
                floor = max(floor, b / (specs["mem_tb_s"] * 1e12))
        if f is not None:
            parts.append(f"{_fmt_num(f)} flop")
            if specs.get("bf16_dense_tflops"):
                floor = max(floor, f / (specs["bf16_dense_tflops"] * 1e12))
        if b and f:
            parts.append(f"{f / b:.3g} flop/B")
        if floor:
            parts.append(f"floor {floor * 1e6:.3g} us at the hardware pack's peak figures")
        out[s.name] = ", ".join(parts)
    return out


def render_task(task: Any, packs: Sequence[Pack] = ()) -> str:
    lines = [f"# Task: {task.name}", task.summary or "", "",
             f"Entry point (the function your module defines): `{_entry_signature(task)}`",
             f"DSL: {task.dsl}; dtypes: {', '.join(task.dtypes)}"]
    tol = "; ".join(f"{dt}: atol {t.atol}, rtol {t.rtol}" for dt, t in task.tolerance.items())
    lines.append(f"Tolerances: {tol}")
    roof = _roofline(task, packs)
    lines += ["", "Shapes (all are checked and timed; the score is the weighted geometric mean of speedups):"]
    for s in task.shapes:
        dims = ", ".join(f"{k}={v}" for k, v in s.dims.items())
        extra = [f"weight {s.weight:g}"] if s.weight != 1.0 else []
        if s.tags:
            extra.append("tags: " + ", ".join(s.tags))
        if s.name in roof:
            extra.append(roof[s.name])
        lines.append(f"- {s.name}: {dims}" + (f" ({'; '.join(extra)})" if extra else ""))
    longs = [s.name for s in task.shapes if s.long]
    if longs:
        lines.append(f"Long-context shapes ({', '.join(longs)}) are never optional: the kernel must be "
                     "correct and fast on them too.")
    interp = ", ".join(f"{s.name} ({', '.join(f'{k}={v}' for k, v in s.dims.items())})"
                       for s in task.interpreter_shapes)
    lines.append(f"Without a GPU, correctness is checked in Triton's interpreter on: {interp}.")
    lines += source_section(task)
    try:
        ref_src = task.reference_path.read_text()
        lines += ["", "Reference implementation (reference.py; the ground truth, never import it):",
                  "```python", ref_src.rstrip(), "```"]
    except OSError:
        pass
    return "\n".join(lines)


def source_section(task: Any) -> list[str]:
    """A task made from a PyTorch function (task.toml [source], `warpsmith tasks new`): that function's
    source, the goal in the person's own words, and what the incumbent is until a kernel is kept."""
    src = getattr(task, "source", None)
    if src is None:
        return []
    try:
        seg = function_segment(task.reference_path.read_text(), src.function)
    except OSError:
        seg = None
    if seg is None:
        return []
    origin = f" (from {Path(src.file).name})" if src.file else ""
    return ["", f"Source of truth: the PyTorch function `{src.function}`{origin}, which this task was made from. "
            f"Your `{task.entry}` computes what it computes (reference() below calls it), in {task.dsl}, for every "
            f"input the contract allows. The incumbent starts as this function run by PyTorch ({src.incumbent}): "
            f"until a kernel is kept, write the first {task.dsl} kernel from scratch; torch may not compute the "
            "answer in a candidate.", "```python", seg.rstrip(), "```"]


def render_attempt(a: Any) -> str:
    s = f"- #{a.iteration} {a.outcome}: {a.description.strip() or '(no description)'}"
    if a.summary:
        s += f" | {a.summary.strip()}"
    if a.veto_reason:
        s += f" | the person said: {a.veto_reason.strip()}"
    return s


def render_history(history: Sequence[Any], drop: int = 0) -> str:
    if not history:
        return ""
    lines = ["# History (earlier attempts, oldest first)"]
    if drop:
        lines.append(f"[{drop} earlier attempt(s) cut to fit the token budget]")
    lines += [render_attempt(a) for a in history[drop:]]
    return "\n".join(lines)


def build_prompt(task: Any, incumbent_source: str, packs: Sequence[Pack], history: Sequence[Any] = (),
                 ideas: Sequence[str] = (), feedback: str | None = None,
                 budget_tokens: int = DEFAULT_BUDGET_TOKENS) -> Prompt:
    packs = _sorted(packs)
    system = render_system(task, packs)
    fixed = [render_task(task, packs)]
    if ideas:
        fixed.append("# Standing directions from the person (follow them)\n"
                     + "\n".join(f"- {i}" for i in ideas))
    fixed.append("# Incumbent (the current best; your candidate replaces this module)\n"
                 f"```python\n{incumbent_source.rstrip()}\n```")
    tail = []
    if feedback:
        tail.append(f"# Feedback on the last attempt\n{feedback.strip()}")
    tail.append("Propose one candidate now: the complete module, and one line on what you changed and why "
                "it should be faster.")
    sep = "\n\n"

    def assemble(drop: int, keep: int) -> tuple[str, list[str], dict[str, list[str]]]:
        pack_text, pack_cut, cut_files = _render_packs(packs, keep)
        hist = render_history(history, drop)
        cut = ([f"history: {drop} oldest of {len(history)} attempts"] if drop else []) + pack_cut
        sections = []
        if packs:
            sections.append("# Context packs (checked facts about the GPU, the model and the DSL)\n\n"
                            + pack_text)
        sections += fixed + ([hist] if hist else []) + tail
        user = sep.join(sections)
        if cut:
            user += sep + "[Cut to fit the token budget: " + "; ".join(cut) + "]"
        return user, cut, cut_files

    def fits(user: str) -> bool:
        return estimate_tokens(system) + estimate_tokens(user) <= budget_tokens

    # Cut the history first, oldest attempts first; then pack files from the end.
    n_files = _n_files(packs)
    drop, keep = 0, n_files
    user, cut, cut_files = assemble(drop, keep)
    while not fits(user) and drop < len(history):
        drop += 1
        user, cut, cut_files = assemble(drop, keep)
    while not fits(user) and keep > 0:
        keep -= 1
        user, cut, cut_files = assemble(drop, keep)
    over = estimate_tokens(system) + estimate_tokens(user) - budget_tokens
    if over > 0:
        cut = cut + [f"still ~{over} tokens over the {budget_tokens}-token budget after cutting all "
                     "history and pack files (the task and incumbent are never cut)"]
        user += sep + f"[{cut[-1]}]"
    prov = []
    for p in packs:
        d = p.provenance()
        d["cut_files"] = cut_files.get(p.id, [])
        prov.append(d)
    return Prompt(system=system, user=user, packs=prov, cut=cut)


def feedback_from_history(history: Sequence[Any]) -> str | None:
    """What the agent must hear about its last try, the last one that ended (candidates still in
    flight have no outcome yet): kept, or how it ended, the verdict's summary and the person's
    veto reason."""
    done = [a for a in history if a.outcome != "in-flight"]
    if not done:
        return None
    a = done[-1]
    if a.outcome == "kept":
        return f"Attempt #{a.iteration} was kept and is now the incumbent." + (
            f" {a.summary.strip()}" if a.summary else "")
    parts = [f"Attempt #{a.iteration} ({a.description.strip() or 'no description'}) ended {a.outcome}."]
    if a.summary:
        parts.append(a.summary.strip())
    if a.veto_reason:
        parts.append(f"The person reverted it, saying: {a.veto_reason.strip()}")
    return "\n".join(parts)


STEP_PROFILE_FILE = "step_profile.json"  # in the session folder: the TUI's profile screen (w) writes it


class SessionPrompt:
    """The prompt a session's loop sends with each proposal (the one assembly: harness.wiring gives
    it to the Loop): `prompt(ctx) -> (system, user, packs provenance)`; the last Prompt in `.last`.

    Beside build_prompt's task, incumbent, history and ideas, it puts in:
    - the session's pack selection (session.meta.packs: the TUI's picker journals a new one with
      Session.set_packs), from the next prompt on; each pack the latest good version the watcher
      holds (live reload). A selection that no longer resolves (a pack removed or broken since it
      was picked) keeps the last set, journalled again, and a warning says why;
    - the feedback on the last attempt (feedback_from_history);
    - for agents that read the prompt (`reads_prompt()`): the step profile, when the session folder
      has one (STEP_PROFILE_FILE); on a GPU, where the incumbent's time goes (harness.profiling.profile,
      measured once per incumbent and cached by its hash), said once per incumbent as ProfileReady.

    `emit` is the loop's: the warning and ProfileReady go through it (journalled, then shown).
    """

    def __init__(self, session: Any, task: Any, catalog: Catalog, watcher: PackWatcher,
                 emit: Callable[[ev.Event], None], on_gpu: bool = False,
                 reads_prompt: Callable[[], bool] = lambda: True,
                 budget_tokens: int = DEFAULT_BUDGET_TOKENS):
        self.session, self.task, self.catalog, self.watcher = session, task, catalog, watcher
        self.emit = emit
        self.on_gpu = on_gpu
        self.reads_prompt = reads_prompt
        self.budget_tokens = budget_tokens
        self.last: Prompt | None = None
        self._profiled = ""  # the incumbent whose profile was last said (ProfileReady)

    def packs(self, iteration: int) -> list[Pack]:
        """The packs of this prompt: the session's selection, as the watcher holds them."""
        wanted = list(self.session.meta.packs)
        if sorted(wanted) != sorted(p.id for p in self.watcher.packs()):
            try:
                self.watcher.set_packs(Selection(wanted).resolve(self.catalog))
            except (KeyError, PackError) as e:  # removed or broken since it was picked: keep the last set
                self.session.set_packs([p.id for p in self.watcher.packs()])
                self.emit(ev.AgentNotice(iteration, "warning", f"pack selection unchanged: {e}"))
        return self.watcher.packs()

    def __call__(self, ctx: Any) -> tuple[str, str, list[dict]]:
        prompt = build_prompt(self.task, ctx.incumbent_source, self.packs(ctx.iteration), ctx.history,
                              ctx.ideas, feedback_from_history(ctx.history), self.budget_tokens)
        self.last = prompt
        user = prompt.user
        if self.reads_prompt():
            user += "".join("\n\n" + section for section in (self.step_profile(), self.gpu_profile(ctx))
                            if section)
        return prompt.system, user, prompt.packs

    def step_profile(self) -> str:
        """The step profile's few lines (far inside the prompt's token budget), or "" without one."""
        path = Path(self.session.root) / STEP_PROFILE_FILE
        if not path.is_file():
            return ""
        from harness.model.step_profile import StepProfile, prompt_section  # (only with one: start-up time)

        try:
            return prompt_section(StepProfile.load(path))
        except (OSError, ValueError, KeyError, TypeError):
            return ""  # an unreadable cache costs the agent this context, never the proposal

    def gpu_profile(self, ctx: Any) -> str:
        """Where the incumbent's time goes, on a GPU (up to two minutes with Nsight Compute, the first
        time for each incumbent); "" without a GPU or when it could not be measured."""
        if not self.on_gpu:
            return ""
        from harness.profiling.profile import cached_profile, prompt_section  # (only on a GPU: start-up time)

        inc = Path(self.session.work) / "incumbent_for_profile.py"
        inc.write_text(ctx.incumbent_source)
        prof = cached_profile(self.task, inc, Path(self.session.work) / "profiles", timeout_s=120)
        if "error" in prof:
            return ""
        if ctx.incumbent_commit != self._profiled:  # once per incumbent
            self._profiled = ctx.incumbent_commit
            self.emit(ev.ProfileReady(ctx.iteration, ctx.incumbent_commit, prof))
        return prompt_section(prof)

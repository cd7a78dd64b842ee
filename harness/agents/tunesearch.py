"""The tuner's memory and sampler: one Optuna study per shape bucket, kept in the session folder.

Every evaluated configuration is one trial in each bucket's study (an evaluation times every shape,
so it tells every bucket something); its value is the geomean time over that bucket's shapes.
What "pruned" means here, honestly: the loop always evaluates a candidate on every shape (it never
runs a subset, by design), so nothing is cut short. A configuration whose time on the bucket's
smallest shape is more than PRUNE_RATIO times the best seen there is recorded in that bucket's study
as PRUNED (Optuna's TPE then ranks it below every completed trial, so its region is sampled less),
and the tuner does not climb from it. Failed configurations (rejected, incorrect, crashed) are FAIL.

Storage: `<session>/tuner/optuna.journal` (Optuna's JournalStorage, an append-only file), so a resume
continues the studies. The session journal stays the source of truth: trials missing from the file
(an older session, a kill between the two writes) are added again from the history.
Sampling uses a throw-away in-memory copy of the bucket's study, so the asks never pollute the file.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path

PRUNE_RATIO = 1.25
N_STARTUP = 3


def _optuna():
    try:  # optuna is optional (the tuner falls back to its own search) and ~120 ms to import
        import optuna
    except ImportError:
        return None
    optuna.logging.set_verbosity(logging.WARNING)
    return optuna


def available() -> bool:
    return _optuna() is not None


def _storage(path: Path | None):
    optuna = _optuna()
    if path is None:
        return optuna.storages.InMemoryStorage()
    path.parent.mkdir(parents=True, exist_ok=True)
    journal = optuna.storages.journal
    backend = getattr(journal, "JournalFileBackend", None) or optuna.storages.JournalFileStorage  # < 4.0
    return journal.JournalStorage(backend(str(path)))


def _distributions(spaces, variant: str, config: dict) -> tuple[dict, dict]:
    optuna = _optuna()
    cat = optuna.distributions.CategoricalDistribution
    params = {"variant": variant}
    dists = {"variant": cat([s.variant for s in spaces])}
    space = next(s for s in spaces if s.variant == variant)
    for p in space.params:
        if p.name in config and config[p.name] in p.values:
            params[f"{variant}:{p.name}"] = config[p.name]
            dists[f"{variant}:{p.name}"] = cat(p.values)
    return params, dists


class Studies:
    """One study per bucket name, synced from the tries on every proposal."""

    def __init__(self, path: Path | None, task_name: str, buckets: list[str]):
        self.optuna = _optuna()
        self.storage = _storage(path)
        self.studies = {b: self.optuna.create_study(study_name=f"{task_name}:{b}", storage=self.storage,
                                                    direction="minimize", load_if_exists=True)
                        for b in buckets}

    def sync(self, spaces, tries, bucket_value) -> None:
        """Add each finished try missing from a bucket's study. `bucket_value(try, bucket)` gives
        (state, value, intermediate values, why)."""
        TS = self.optuna.trial.TrialState
        known = {s.variant for s in spaces}
        for b, study in self.studies.items():
            have = {t.user_attrs.get("iteration") for t in study.get_trials(deepcopy=False)}
            for t in tries:
                if t.iteration in have or t.variant not in known or t.outcome in ("in-flight", "duplicate"):
                    continue
                state, value, inter, why = bucket_value(t, b)
                params, dists = _distributions(spaces, t.variant, t.config)
                try:
                    study.add_trial(self.optuna.trial.create_trial(
                        state=getattr(TS, state), value=value if state == "COMPLETE" else None,
                        params=params, distributions=dists, intermediate_values=inter,
                        user_attrs={"iteration": t.iteration, "why": why}))
                except ValueError:  # a declaration edited mid-session: that trial no longer fits
                    continue

    def ask(self, bucket: str, spaces, seed: int) -> tuple[str, dict]:
        """A configuration TPE suggests for this bucket (may be one already tried: the caller checks)."""
        optuna = self.optuna
        scratch = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(
            n_startup_trials=N_STARTUP, seed=seed))
        scratch.add_trials(self.studies[bucket].get_trials(deepcopy=False))
        trial = scratch.ask()
        variant = trial.suggest_categorical("variant", [s.variant for s in spaces])
        space = next(s for s in spaces if s.variant == variant)
        config = {p.name: trial.suggest_categorical(f"{variant}:{p.name}", p.values) for p in space.params}
        return variant, config

    def counts(self, bucket: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.studies[bucket].get_trials(deepcopy=False):
            out[t.state.name] = out.get(t.state.name, 0) + 1
        return out


def geomean(xs) -> float | None:
    xs = [x for x in xs if isinstance(x, (int, float)) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None

"""The self-play data stage of the offline paradigm (OXRL, Li 2026, arXiv 2603.19335; oxRL
`data/generate_prefs.py`): from the warm start, sample `offline.samples` responses (T =
`offline.temperature`) for each prompt of the finite training split (the first `offline.n_prompts`
items of the task's train split), score them with the task's verifier, and keep per prompt
(prompt, chosen = the best-scored response, rejected = the worst, every reward). Groups whose
responses all tie are skipped, as OXRL does (there is no preference to learn from them).

Cached by content hash like the warm start (`run.cache_dir/selfplay/<key>/data.json`): every run
of a sweep that shares the warm start and the offline.* settings (whatever its RL seed or loss)
loads the same data set, built once under a lock and written atomically. The stage's generation
FLOPs (2N per prompt and response token, as every rollout) are recorded with it and charged to
each run that trains on it, so offline and online runs share the compute axis.

`sft_gold` (property `selfplay` false) needs no generation: its "chosen" response is each item's
reference answer, and nothing is charged.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import Config, identity
from ..engines import HFEngine
from ..models import count_params
from ..storage import atomic_write_text, file_lock
from .metrics import forward_flops
from .warm_start import load_warm_model

SELFPLAY_VERSION = 1  # bump when the procedure changes, so old caches are not reused
CHUNK_PROMPTS = 32    # prompts per generate call (x offline.samples rows)


@dataclass
class OfflineData:
    """The offline training set: `pairs[i]` = {"item": index in the split, "prompt": text,
    "chosen": token ids, "rejected": token ids or None, "rewards": the group's scores or None};
    `info`: its provenance and cost (n_prompts, n_pairs, n_tied, flops, tokens, wall_s, key)."""
    pairs: list
    info: dict

    def __len__(self) -> int:
        return len(self.pairs)


def selfplay_key(cfg: Config, warm_path: Path) -> str:
    """What the data set depends on: the warm start (its cache entry names its own content hash;
    a pretrained start is its path), the offline.* settings, the task, the generation limit."""
    d = {"v": SELFPLAY_VERSION, "warm": str(warm_path.name if warm_path.parent.name == "warmstart"
                                            else warm_path),
         "offline": {k: getattr(cfg.offline, k) for k in ("n_prompts", "samples", "temperature", "seed")},
         "task": identity(cfg.to_dict())["task"], "max_new_tokens": cfg.rollout.max_new_tokens}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def select_pair(scores: list[float]) -> tuple[int, int] | None:
    """(chosen, rejected) indices of one group: the first best- and the first worst-scored
    response; None when every response ties (the group is skipped)."""
    hi, lo = max(scores), min(scores)
    if hi == lo:
        return None
    return scores.index(hi), scores.index(lo)


def build_selfplay(cfg: Config, tok, task, warm_path: Path, device) -> OfflineData:
    """Sample, score and select (see the module docstring); seeded by offline.seed."""
    o = cfg.offline
    t0 = time.time()
    model = load_warm_model(warm_path, device).eval()
    n_params = count_params(model)
    engine = HFEngine(model, tok)
    items, _ = task.take("train", 0, o.n_prompts)
    pairs, flops, tokens, n_tied = [], 0, 0, 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(o.seed)
        for start in range(0, len(items), CHUNK_PROMPTS):
            chunk = items[start:start + CHUNK_PROMPTS]
            ro = engine.generate([it.prompt for it in chunk for _ in range(o.samples)],
                                 max_new_tokens=cfg.rollout.max_new_tokens, temperature=o.temperature)
            flops += forward_flops(n_params, int(ro.prompt_mask.sum()) + ro.n_tokens)
            tokens += ro.n_tokens
            for g, it in enumerate(chunk):
                rows = range(g * o.samples, (g + 1) * o.samples)
                scores = [task.score(ro.texts[r], it) for r in rows]
                sel = select_pair(scores)
                if sel is None:
                    n_tied += 1
                    continue
                ids = [ro.response_ids[rows[j], :int(ro.lengths[rows[j]])].tolist() for j in sel]
                pairs.append({"item": start + g, "prompt": it.prompt, "chosen": ids[0],
                              "rejected": ids[1], "rewards": scores})
    info = {"n_prompts": len(items), "n_pairs": len(pairs), "n_tied": n_tied, "flops": flops,
            "tokens": tokens, "wall_s": time.time() - t0, "n_params": n_params,
            "samples": o.samples, "temperature": o.temperature}
    return OfflineData(pairs, info)


def gold_data(cfg: Config, tok, task) -> OfflineData:
    """sft_gold: each training item's reference answer (+ EOS) as its chosen response."""
    items, _ = task.take("train", 0, cfg.offline.n_prompts)
    pairs = [{"item": i, "prompt": it.prompt,
              "chosen": tok.encode(it.reference, add_special_tokens=False) + [tok.eos_token_id],
              "rejected": None, "rewards": None} for i, it in enumerate(items)]
    return OfflineData(pairs, {"n_prompts": len(items), "n_pairs": len(pairs), "n_tied": 0,
                               "flops": 0, "tokens": 0, "wall_s": 0.0})


def get_offline_data(cfg: Config, tok, task, warm_path: Path, device, selfplay: bool) -> OfflineData:
    """The run's offline data set: the cached self-play set (built under a lock if missing), or
    the gold answers. Raises if no group of the split has a preference (all tied)."""
    if not selfplay:
        return gold_data(cfg, tok, task)
    key = selfplay_key(cfg, warm_path)
    out = Path(cfg.run.cache_dir) / "selfplay" / key / "data.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(out.parent.parent / f".{key}.lock"):
        if not out.exists():
            data = build_selfplay(cfg, tok, task, warm_path, device)
            data.info["key"] = key
            atomic_write_text(out, json.dumps({"info": data.info, "pairs": data.pairs}))
    raw = json.loads(out.read_text())
    data = OfflineData(raw["pairs"], raw["info"])
    if not data.pairs:
        raise RuntimeError(f"self-play: every one of the {data.info['n_prompts']} groups tied "
                           f"(offline.samples = {cfg.offline.samples}); no preference pair to train "
                           f"on: raise offline.n_prompts or offline.samples")
    return data

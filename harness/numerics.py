"""Numerics switches that change how, not what, the model computes.

`use_fp32_lm_head`: the LM head (the projection to vocabulary logits) runs in fp32 whatever the
model's dtype, for sampling and for training alike, so the sampler's and the trainer's
probabilities agree more closely. ScaleRL (Khatri et al. 2025, arXiv 2510.13786) reports that this
fix raised the asymptote A from 0.52 to 0.61; MiniMax-M1 (arXiv 2506.13585) made the same fix.
It matters for bf16/fp16 models (`model.dtype = bf16`: forward passes under torch.autocast, which
would otherwise run the head in bf16 too); for the fp32 models of the CPU default it is an exact
no-op (same matmul in the same dtype).

`fingerprint`: what a run computed *on*. A fixed config and seed give the same metrics only on the
same numerics: torch dispatches its CPU kernels on the instruction set (AVX2 vs AVX512) and MKL/oneDNN
pick their own code paths per CPU, so the same warm-up run on two CPUs diverges after a few steps.
Measured (LOG 2026-12-05): the study-m4 warm start (150 supervised steps, lr 3e-3) ends at a step-0
pass rate of 0.400 on an AMD EPYC and 0.456 on an Intel Xeon (AVX512); forcing other kernel paths on
the Xeon gives 0.336 to 0.430. Every run records its fingerprint and its warm start's, so a report
can say when its runs did not share numerics and a replication that starts elsewhere is named.
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch
import torch.nn.functional as F


def use_fp32_lm_head(model: torch.nn.Module) -> torch.nn.Module:
    """Patch the output projection in place to compute in fp32 (the weights keep their dtype and
    their state_dict keys; tied embeddings stay tied)."""
    head = model.get_output_embeddings()

    def forward(hidden: torch.Tensor) -> torch.Tensor:
        bias = None if head.bias is None else head.bias.float()
        with torch.autocast(hidden.device.type, enabled=False):  # autocast would recast to bf16
            return F.linear(hidden.float(), head.weight.float(), bias)

    head.forward = forward
    return model


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fingerprint(device: torch.device | str = "cpu") -> dict:
    """The numerics a process computes with: CPU model, torch's CPU kernel capability, torch
    version, intra-op threads and, on CUDA, the GPU. ``summary`` is one line of it."""
    d = {"cpu": _cpu_name(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
         "torch": torch.__version__, "threads": torch.get_num_threads(), "gpu": None}
    dev = torch.device(device)
    if dev.type == "cuda":
        d["gpu"] = torch.cuda.get_device_name(dev)
    d["summary"] = summarize(d)
    return d


def summarize(d: dict | None) -> str:
    """'Intel(R) Xeon(R) Processor AVX512, torch 2.13.0+cpu, 1 thread' (or 'unknown' for a run
    written before fingerprints were recorded)."""
    if not d:
        return "unknown"
    gpu = f", {d['gpu']}" if d.get("gpu") else ""
    n = d.get("threads")
    return f"{d.get('cpu')} {d.get('cpu_capability')}, torch {d.get('torch')}, {n} thread{'s' * (n != 1)}{gpu}"

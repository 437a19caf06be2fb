"""A workload straight from a torch.nn.Module (torch is optional: imported only here, when called)."""
from __future__ import annotations

import json
from numbers import Integral
from typing import Any, Dict, List, Optional

from . import _core
from ._errors import InputError

_NAME = "<module.config>"


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise InputError(f"model_from_module: {name} {value!r}: expected a positive integer")
    return int(value)


def _largest_module_list(module: Any, torch: Any) -> Optional[Any]:
    best = None
    for m in module.modules():
        if isinstance(m, torch.nn.ModuleList) and (best is None or len(m) > len(best)):
            best = m
    return best


def _largest_embedding(module: Any, torch: Any) -> Optional[Any]:
    embs = [m for m in module.modules() if isinstance(m, torch.nn.Embedding)]
    return max(embs, key=lambda e: e.num_embeddings) if embs else None


def _check_against_module(model: Dict[str, Any], module: Any, torch: Any) -> List[str]:
    """What the module's own structure says against its config: the block count and the token embedding."""
    problems = []
    blocks = _largest_module_list(module, torch)
    if blocks is not None and len(blocks) != model["layers"]:
        problems.append(f"the module has {len(blocks)} blocks, its config {model['layers']} layers")
    emb = _largest_embedding(module, torch)
    if emb is not None:
        if emb.embedding_dim != model["hidden"]:
            problems.append(f"the token embedding is {emb.embedding_dim} wide, the config's hidden size {model['hidden']}")
        if emb.num_embeddings != model["vocab"]:
            problems.append(f"the token embedding has {emb.num_embeddings} rows, the config's vocabulary {model['vocab']}")
    return problems


def model_from_module(module: Any, seq_len: int, micro_batch: int, dtype: str = "bf16") -> Dict[str, Any]:
    """The ``workload`` section of an experiment for a ``torch.nn.Module``.

    Build the model on the meta device (no weights, no GPU), e.g. with ``transformers``::

        with torch.device("meta"):
            module = AutoModelForCausalLM.from_config(config)
        workload = stepsim.model_from_module(module, seq_len=4096, micro_batch=1)

    The module's Hugging Face ``config`` is read as ``"model": {"hf_config": ...}`` reads a
    config.json (the families stepsim models: llama, mistral, qwen2, opt, gpt2, gpt_neox, mpt;
    docs/configuration-foreign.md), and the module's own blocks and token embedding are checked
    against it. Anything else raises :class:`InputError` saying what was expected.

    Returns:
        ``{"model": {family, hidden, layers, heads, kv_heads, ffn, vocab, ...}, "seq_len",
        "micro_batch", "dtype"}``: put it under ``"workload"`` of an experiment dict.
    """
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("stepsim.model_from_module needs torch (pip install torch); everything else in stepsim does not") from e
    if not isinstance(module, torch.nn.Module):
        raise InputError(f"model_from_module: {type(module).__name__}: expected a torch.nn.Module")
    seq_len = _positive(seq_len, "seq_len")
    micro_batch = _positive(micro_batch, "micro_batch")
    config = getattr(module, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        raise InputError(f"model_from_module: {type(module).__name__}: expected a Hugging Face model (a module with a "
                         "`config` having to_dict(), e.g. from transformers' AutoModelForCausalLM.from_config); other "
                         "modules: write the dimensions as workload.model (docs/configuration.md)")
    cfg = config.to_dict()
    model = json.loads(_core.hf_model(json.dumps(cfg, default=str), _NAME, seq_len))
    if not cfg.get("_name_or_path"):
        model["name"] = type(module).__name__  # the reader's default names the config's "file"
    problems = _check_against_module(model, module, torch)
    if problems:
        raise InputError(f"model_from_module: {type(module).__name__}: {'; '.join(problems)}: expected a module built "
                         "from its config unchanged")
    return {"model": model, "seq_len": seq_len, "micro_batch": micro_batch, "dtype": dtype}

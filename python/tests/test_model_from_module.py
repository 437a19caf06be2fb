"""stepsim.model_from_module: a workload from a torch.nn.Module built on the meta device.

torch is optional: without it these tests are skipped (with the reason in pytest's summary).
The modules here are built as transformers builds a causal LM (an embedding, a ModuleList of
blocks, a `config` with to_dict()), without transformers itself.
"""
import json

import pytest

import stepsim
from conftest import ROOT

torch = pytest.importorskip("torch", reason="torch is not installed: model_from_module is not tested here (pip install torch)")

LLAMA3_8B_CONFIG = ROOT / "configs/models/hf/meta-llama-3-8b.config.json"
HF_EXAMPLE = "configs/examples/llama3-8b-hfconfig-fsdp2-8xh100.json"


class Config:
    def __init__(self, d):
        self._d = d

    def to_dict(self):
        return dict(self._d)


class CausalLM(torch.nn.Module):
    """The shape of a Hugging Face causal LM: what model_from_module checks against the config."""

    def __init__(self, cfg, layers=None, vocab=None):
        super().__init__()
        self.config = Config(cfg)
        h = cfg["hidden_size"]
        self.embed_tokens = torch.nn.Embedding(vocab or cfg["vocab_size"], h)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(h, h, bias=False) for _ in range(layers or cfg["num_hidden_layers"]))


def _meta(*args, **kwargs):
    with torch.device("meta"):
        return CausalLM(*args, **kwargs)


def test_a_llama_module_simulates_as_its_config_json():
    cfg = json.loads(LLAMA3_8B_CONFIG.read_text())
    module = _meta(cfg)
    assert next(module.parameters()).is_meta
    workload = stepsim.model_from_module(module, seq_len=8192, micro_batch=1)
    assert workload["model"]["hidden"] == 4096 and workload["model"]["layers"] == 32
    assert workload["model"]["kv_heads"] == 8 and workload["model"]["family"] == "llama"
    exp = json.loads((ROOT / HF_EXAMPLE).read_text())
    exp["workload"]["model"] = workload["model"]
    assert stepsim.simulate(exp).metrics == stepsim.simulate(HF_EXAMPLE).metrics


def test_a_module_that_disagrees_with_its_config_is_refused():
    cfg = json.loads(LLAMA3_8B_CONFIG.read_text())
    with pytest.raises(stepsim.InputError, match="the module has 4 blocks, its config 32 layers"):
        stepsim.model_from_module(_meta(cfg, layers=4), seq_len=4096, micro_batch=1)


def test_an_unknown_architecture_or_a_plain_module_is_a_clear_error():
    cfg = dict(json.loads(LLAMA3_8B_CONFIG.read_text()), model_type="bert")
    with pytest.raises(stepsim.InputError, match="/model_type: \"bert\": expected a model family stepsim models"):
        stepsim.model_from_module(_meta(cfg), seq_len=4096, micro_batch=1)
    with torch.device("meta"):
        plain = torch.nn.Linear(8, 8)
    with pytest.raises(stepsim.InputError, match="expected a Hugging Face model"):
        stepsim.model_from_module(plain, seq_len=4096, micro_batch=1)
